// Byte-level decoder-only transformer (GPT): token and position embeddings,
// pre-LayerNorm blocks of causal self-attention and a GELU MLP, tied output head.
#pragma once

#include <torch/torch.h>

#include "inner/model_config.h"
#include "inner/models/kv_cache.h"

namespace diloco::inner {

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const ModelConfig& config);
  // With `cache`, x follows its positions and joins its layer `layer`.
  torch::Tensor forward(const torch::Tensor& x, KvCache* cache = nullptr, std::size_t layer = 0);

 private:
  int n_heads_;
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear proj_{nullptr};
  torch::Tensor mask_;
};
TORCH_MODULE(CausalSelfAttention);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, KvCache* cache = nullptr, std::size_t layer = 0);

 private:
  torch::nn::LayerNorm ln1_{nullptr};
  CausalSelfAttention attn_{nullptr};
  torch::nn::LayerNorm ln2_{nullptr};
  torch::nn::Linear fc_{nullptr};
  torch::nn::Linear out_{nullptr};
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  // Initializes weights from the current torch generator (seed it first).
  explicit GptImpl(const ModelConfig& config);

  // tokens [B, T] int64 -> logits [B, T, vocab]. With `cache`, the tokens
  // follow its positions (at most seq_len in all) and are appended to it.
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache = nullptr);
  // Mean next-byte cross-entropy in nats.
  torch::Tensor loss(const torch::Tensor& inputs, const torch::Tensor& targets);

  const ModelConfig& config() const { return config_; }

 private:
  ModelConfig config_;
  torch::nn::Embedding token_embedding_{nullptr};
  torch::nn::Embedding position_embedding_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_final_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace diloco::inner
