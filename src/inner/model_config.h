// Model kinds and sizes; kept apart from the model headers so readers (the
// recipe, the planner) need no torch.
#pragma once

#include <string>

namespace diloco::inner {

enum class ModelKind {
  kGpt,    // byte-level GPT: learned positions, LayerNorm, GELU MLP, biases, tied head
  kLlama,  // Llama-style: RMSNorm, rotary positions, SwiGLU MLP, no biases, grouped-query attention
  kTorchScript,  // any scripted PyTorch module: forward(tokens [B, T] int64) -> logits [B, T, vocab]
};

// Hugging Face's rope_scaling of rope_type "llama3" (Llama 3.1): wavelengths
// longer than original_max_positions / low_freq_factor are stretched by
// `factor`, those shorter than .../high_freq_factor kept, the band between
// interpolated. An empty type means no scaling.
struct RopeScaling {
  std::string type;  // "" or "llama3"
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_positions = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  ModelKind kind = ModelKind::kGpt;
  int vocab = 256;  // bytes
  int d_model = 128;
  int n_layers = 2;
  int n_heads = 4;
  int seq_len = 64;  // context length
  // llama: heads of keys and values (grouped-query attention when fewer than
  // n_heads; must divide it); 0 means n_heads.
  int n_kv_heads = 0;
  // llama: SwiGLU hidden width; 0 means 8/3 of d_model rounded up to a
  // multiple of 256, as Llama does.
  int ffn_hidden = 0;
  bool tie_embeddings = true;  // llama: the output head is the token embedding (gpt: always)
  double rope_theta = 10000.0;  // llama: rotary base (Su et al. 2021; Llama 1 and 2 use 10^4, Llama 3 5*10^5)
  double norm_eps = 1e-5;       // llama: RMSNorm epsilon (Llama 2 and 3 use 1e-5, Llama 1 1e-6)
  RopeScaling rope_scaling;     // llama: none, or Llama 3.1's frequency-dependent stretch
  // llama: the longest context the model serves (Hugging Face's
  // max_position_embeddings): eval and sample may use positions up to it;
  // 0 means seq_len.
  int max_positions = 0;
  std::string path;  // torchscript: the file torch.jit.save wrote
};

// The longest context of `c`: max_positions, or seq_len when unset or shorter.
inline int context_length(const ModelConfig& c) { return c.max_positions > c.seq_len ? c.max_positions : c.seq_len; }

// The SwiGLU width `config` asks for (ffn_hidden, or Llama's rule).
inline int llama_ffn_hidden(const ModelConfig& c) {
  if (c.ffn_hidden > 0) return c.ffn_hidden;
  const int h = 8 * c.d_model / 3;
  return (h + 255) / 256 * 256;
}

// Parameters the model of `c` has, without building it (for `diloco check`
// and the planner); the unit tests hold it to the built models' counts.
// (A TorchScript module's count is known only once it is loaded: -1.)
long long parameter_count(const ModelConfig& c);
// The parameters inner.optimizer = "muon" trains with Muon (one momentum
// buffer each, where AdamW keeps two moments): the blocks' 2-D weights,
// not the embeddings or the head (inner::muon_trains decides on a built
// model; -1 for TorchScript, whose modules only a build can tell).
long long muon_parameter_count(const ModelConfig& c);

// Throws std::invalid_argument naming the model.* key whose value a Llama
// cannot be built with.
void check_llama_config(const ModelConfig& c);

}  // namespace diloco::inner
