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
  std::string path;  // torchscript: the file torch.jit.save wrote
};

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

// Throws std::invalid_argument naming the model.* key whose value a Llama
// cannot be built with.
void check_llama_config(const ModelConfig& c);

}  // namespace diloco::inner
