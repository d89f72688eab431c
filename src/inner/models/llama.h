// A Llama-style decoder (Touvron et al. 2023): pre-norm RMSNorm blocks,
// rotary position embeddings on queries and keys, grouped-query attention,
// SwiGLU MLP, no biases, tied or untied output head. Modules are named as
// Hugging Face names Llama tensors (model.layers.N.self_attn.q_proj, ...), so
// weights map one to one.
#pragma once

#include <torch/torch.h>

#include "inner/model_config.h"
#include "inner/models/kv_cache.h"

namespace diloco::inner {

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const ModelConfig& c);
  // cos, sin: [T, head_dim] rotary tables; mask: [T, past + T] true where
  // a key follows its query (undefined: none). With `cache`, the keys and
  // values join those of the cache's layer `layer` (past = cache->length).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, KvCache* cache = nullptr, std::size_t layer = 0);

 private:
  int n_heads_;
  int n_kv_heads_;
  int head_dim_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};
};
TORCH_MODULE(LlamaMlp);

class LlamaBlockImpl : public torch::nn::Module {
 public:
  explicit LlamaBlockImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, KvCache* cache = nullptr, std::size_t layer = 0);

 private:
  RmsNorm input_layernorm_{nullptr};
  LlamaAttention self_attn_{nullptr};
  RmsNorm post_attention_layernorm_{nullptr};
  LlamaMlp mlp_{nullptr};
};
TORCH_MODULE(LlamaBlock);

// The decoder without its head: "model" in Hugging Face's naming.
class LlamaBodyImpl : public torch::nn::Module {
 public:
  explicit LlamaBodyImpl(const ModelConfig& c);
  // -> normed hidden states [B, T, d]. With `cache`, `tokens` follow its
  // positions, and their keys and values are appended to it.
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache = nullptr);
  torch::nn::Embedding embed_tokens{nullptr};

 private:
  // Rotary tables of positions [start, start + T) on `device`.
  std::pair<torch::Tensor, torch::Tensor> rope(std::int64_t start, std::int64_t T, const torch::Device& device);
  torch::nn::ModuleList layers_{nullptr};
  RmsNorm norm_{nullptr};
  torch::Tensor inv_freq_;  // double, on the CPU: tables past seq_len are computed from it
  torch::Tensor cos_, sin_, mask_;
};
TORCH_MODULE(LlamaBody);

class LlamaImpl : public torch::nn::Module {
 public:
  // Initializes weights from the current torch generator (seed it first).
  explicit LlamaImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache = nullptr);  // -> logits [B, T, vocab]

 private:
  LlamaBody model_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // absent when tied
};
TORCH_MODULE(Llama);

// Rotary inverse frequencies theta^(-2i/d) in double, stretched as Hugging
// Face's _compute_llama3_parameters does when c.rope_scaling.type is "llama3".
torch::Tensor rope_inverse_frequencies(const ModelConfig& c, int head_dim);

}  // namespace diloco::inner
