// Checks of model shapes that need no torch (the recipe runs them).
#include "inner/model_config.h"

#include <stdexcept>
#include <string>

namespace diloco::inner {

void check_llama_config(const ModelConfig& c) {
  const auto fail = [](const std::string& why) { throw std::invalid_argument(why); };
  if (c.d_model % c.n_heads != 0)
    fail("model.n_heads (" + std::to_string(c.n_heads) + ") must divide model.d_model (" + std::to_string(c.d_model) + ")");
  if ((c.d_model / c.n_heads) % 2 != 0)
    fail("model.d_model / model.n_heads (" + std::to_string(c.d_model / c.n_heads) +
         ") must be even for rotary position embeddings");
  const int kv = c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads;
  if (c.n_heads % kv != 0)
    fail("model.n_kv_heads (" + std::to_string(kv) + ") must divide model.n_heads (" + std::to_string(c.n_heads) + ")");
  if (!(c.rope_theta > 1.0)) fail("model.rope_theta (" + std::to_string(c.rope_theta) + ") must be above 1");
  if (!(c.norm_eps > 0.0 && c.norm_eps < 1.0)) fail("model.norm_eps (" + std::to_string(c.norm_eps) + ") must be in (0, 1)");
  const auto& s = c.rope_scaling;
  if (!s.type.empty() && s.type != "llama3")
    fail("model.rope_scaling: rope_type \"" + s.type + "\" is not implemented (only \"llama3\")");
  if (s.type == "llama3" &&
      !(s.factor > 0.0 && s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor && s.original_max_positions > 0))
    fail("model.rope_scaling: llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
         "original_max_position_embeddings > 0");
}

long long parameter_count(const ModelConfig& c) {
  if (c.kind == ModelKind::kTorchScript) return -1;
  const long long d = c.d_model, L = c.n_layers, V = c.vocab;
  if (c.kind == ModelKind::kGpt) {
    // Embeddings (tokens, positions), per block two LayerNorms, qkv and
    // projection with biases, a 4x MLP with biases; a final LayerNorm.
    const long long block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
    return V * d + static_cast<long long>(c.seq_len) * d + L * block + 2 * d;
  }
  const long long head_dim = d / c.n_heads;
  const long long kv = (c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads) * head_dim;
  const long long hidden = llama_ffn_hidden(c);
  // Per block two RMSNorm gains, q and o (d x d), k and v (d x kv), SwiGLU
  // (three d x hidden); embeddings, a final gain, and an untied head.
  const long long block = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * hidden;
  return V * d + L * block + d + (c.tie_embeddings ? 0 : V * d);
}

long long muon_parameter_count(const ModelConfig& c) {
  if (c.kind == ModelKind::kTorchScript) return -1;
  const long long d = c.d_model, L = c.n_layers;
  if (c.kind == ModelKind::kGpt) return L * (3 * d * d + d * d + 4 * d * d + 4 * d * d);  // qkv, proj, fc, out
  const long long head_dim = d / c.n_heads;
  const long long kv = (c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads) * head_dim;
  return L * (2 * d * d + 2 * d * kv + 3 * d * llama_ffn_hidden(c));  // q, o; k, v; gate, up, down
}

}  // namespace diloco::inner
