// The preset table.
#include "app/model_presets.h"

namespace diloco::app {
namespace {

inner::ModelConfig llama(int vocab, int d_model, int n_layers, int n_heads, int n_kv_heads) {
  inner::ModelConfig c;
  c.kind = inner::ModelKind::kLlama;
  c.vocab = vocab;
  c.d_model = d_model;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.tie_embeddings = true;
  return c;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  // The DiLoCo paper's three sizes (Douillard et al. 2023, its table of model
  // sizes: Chinchilla-style decoders, vocabulary 32k): 3 or 12 layers of
  // width 896 with 16 heads of 64, and 12 layers of width 1536 with 12 heads
  // of 128. Built here as Llama-style decoders (SwiGLU of 8/3 the width,
  // rounded up to 256) with tied embeddings, which lands on the paper's
  // parameter counts: 57.6M, 150M and 389M.
  static const std::vector<ModelPreset> presets = {
      {"diloco-60m", llama(32000, 896, 3, 16, 16), "DiLoCo's 60M: 3 layers, width 896, 16 heads"},
      {"diloco-150m", llama(32000, 896, 12, 16, 16), "DiLoCo's 150M: 12 layers, width 896, 16 heads"},
      {"diloco-400m", llama(32000, 1536, 12, 12, 12), "DiLoCo's 400M: 12 layers, width 1536, 12 heads"},
      // Byte vocabulary, for tests and for the benchmarks' ~25M row.
      {"llama-tiny", llama(256, 64, 2, 4, 2), "0.1M params, 2 key/value heads (grouped-query attention)"},
      {"llama-25m", llama(256, 512, 8, 8, 4), "25M params, 4 key/value heads"},
  };
  return presets;
}

const ModelPreset* find_model_preset(const std::string& name) {
  for (const auto& p : model_presets())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace diloco::app
