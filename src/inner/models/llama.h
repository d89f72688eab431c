// A Llama-style decoder (Touvron et al. 2023): pre-norm RMSNorm blocks,
// rotary position embeddings on queries and keys, grouped-query attention,
// SwiGLU MLP, no biases, tied or untied output head. Modules are named as
// Hugging Face names Llama tensors (model.layers.N.self_attn.q_proj, ...), so
// weights map one to one.
#pragma once

#include <torch/torch.h>

#include "inner/model_config.h"

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
  // cos, sin: [T, head_dim] rotary tables; mask: [T, T] true above the diagonal.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask);

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
                        const torch::Tensor& mask);

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
  torch::Tensor forward(const torch::Tensor& tokens);  // -> normed hidden states [B, T, d]
  torch::nn::Embedding embed_tokens{nullptr};

 private:
  torch::nn::ModuleList layers_{nullptr};
  RmsNorm norm_{nullptr};
  torch::Tensor cos_, sin_, mask_;
};
TORCH_MODULE(LlamaBody);

class LlamaImpl : public torch::nn::Module {
 public:
  // Initializes weights from the current torch generator (seed it first).
  explicit LlamaImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& tokens);  // -> logits [B, T, vocab]

 private:
  LlamaBody model_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // absent when tied
};
TORCH_MODULE(Llama);

}  // namespace diloco::inner
