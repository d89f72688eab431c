// Llama-style decoder: forward pass and initialization.
#include "inner/models/llama.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace diloco::inner {
namespace {

constexpr double kNormEps = 1e-5;
constexpr double kRopeTheta = 10000.0;  // Su et al. 2021; Llama's default

torch::nn::Linear linear(int in, int out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }

// Pairs (i, i + d/2) rotate together, as Hugging Face's rotate_half does.
torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

}  // namespace

RmsNormImpl::RmsNormImpl(int dim, double eps) : eps_(eps) { weight = register_parameter("weight", torch::ones({dim})); }

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  // In fp32 whatever autocast does elsewhere: the mean of squares is where
  // bf16 loses the most.
  const auto x32 = x.to(torch::kFloat);
  const auto normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return normed.to(x.scalar_type()) * weight;
}

LlamaAttentionImpl::LlamaAttentionImpl(const ModelConfig& c)
    : n_heads_(c.n_heads), n_kv_heads_(c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads), head_dim_(c.d_model / c.n_heads) {
  q_proj_ = register_module("q_proj", linear(c.d_model, n_heads_ * head_dim_));
  k_proj_ = register_module("k_proj", linear(c.d_model, n_kv_heads_ * head_dim_));
  v_proj_ = register_module("v_proj", linear(c.d_model, n_kv_heads_ * head_dim_));
  o_proj_ = register_module("o_proj", linear(n_heads_ * head_dim_, c.d_model));
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                          const torch::Tensor& mask) {
  const auto B = x.size(0);
  const auto T = x.size(1);
  auto q = q_proj_->forward(x).view({B, T, n_heads_, head_dim_}).transpose(1, 2);
  auto k = k_proj_->forward(x).view({B, T, n_kv_heads_, head_dim_}).transpose(1, 2);
  auto v = v_proj_->forward(x).view({B, T, n_kv_heads_, head_dim_}).transpose(1, 2);
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;
  if (n_kv_heads_ != n_heads_) {  // each key/value head serves a group of query heads
    k = k.repeat_interleave(n_heads_ / n_kv_heads_, 1);
    v = v.repeat_interleave(n_heads_ / n_kv_heads_, 1);
  }
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  auto y = torch::matmul(torch::softmax(scores, -1), v);
  return o_proj_->forward(y.transpose(1, 2).reshape({B, T, n_heads_ * head_dim_}));
}

LlamaMlpImpl::LlamaMlpImpl(const ModelConfig& c) {
  const int hidden = llama_ffn_hidden(c);
  gate_proj_ = register_module("gate_proj", linear(c.d_model, hidden));
  up_proj_ = register_module("up_proj", linear(c.d_model, hidden));
  down_proj_ = register_module("down_proj", linear(hidden, c.d_model));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  return down_proj_->forward(torch::silu(gate_proj_->forward(x)) * up_proj_->forward(x));
}

LlamaBlockImpl::LlamaBlockImpl(const ModelConfig& c) {
  input_layernorm_ = register_module("input_layernorm", RmsNorm(c.d_model, kNormEps));
  self_attn_ = register_module("self_attn", LlamaAttention(c));
  post_attention_layernorm_ = register_module("post_attention_layernorm", RmsNorm(c.d_model, kNormEps));
  mlp_ = register_module("mlp", LlamaMlp(c));
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                      const torch::Tensor& mask) {
  auto h = x + self_attn_->forward(input_layernorm_->forward(x), cos, sin, mask);
  return h + mlp_->forward(post_attention_layernorm_->forward(h));
}

LlamaBodyImpl::LlamaBodyImpl(const ModelConfig& c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab, c.d_model));
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < c.n_layers; ++i) layers_->push_back(LlamaBlock(c));
  norm_ = register_module("norm", RmsNorm(c.d_model, kNormEps));
  // Rotary tables for every position up to seq_len: angle t * theta^(-2i/d).
  const int head_dim = c.d_model / c.n_heads;
  const auto inv_freq =
      torch::pow(kRopeTheta, -torch::arange(0, head_dim, 2, torch::kDouble) / static_cast<double>(head_dim));
  const auto angles = torch::outer(torch::arange(c.seq_len, torch::kDouble), inv_freq);
  const auto both = torch::cat({angles, angles}, -1);
  cos_ = register_buffer("rope_cos", both.cos().to(torch::kFloat));
  sin_ = register_buffer("rope_sin", both.sin().to(torch::kFloat));
  mask_ = register_buffer("mask", torch::ones({c.seq_len, c.seq_len}, torch::kBool).triu(1));
}

torch::Tensor LlamaBodyImpl::forward(const torch::Tensor& tokens) {
  const auto T = tokens.size(1);
  const auto cos = cos_.slice(0, 0, T);
  const auto sin = sin_.slice(0, 0, T);
  const auto mask = mask_.slice(0, 0, T).slice(1, 0, T);
  auto x = embed_tokens->forward(tokens);
  for (const auto& layer : *layers_) x = layer->as<LlamaBlock>()->forward(x, cos, sin, mask);
  return norm_->forward(x);
}

LlamaImpl::LlamaImpl(const ModelConfig& c) {
  check_llama_config(c);
  model_ = register_module("model", LlamaBody(c));
  if (!c.tie_embeddings) lm_head_ = register_module("lm_head", linear(c.d_model, c.vocab));
  // N(0, 0.02) for every matrix, residual projections scaled by 1/sqrt(2L)
  // (GPT-2's rule, which Llama-style small models commonly keep).
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * c.n_layers);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (name.find("layernorm") != std::string::npos || name == "model.norm.weight") p.fill_(1.0);
    else if (name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight")) p.normal_(0.0, residual_std);
    else p.normal_(0.0, 0.02);
  }
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& tokens) {
  const auto h = model_->forward(tokens);
  return lm_head_ ? lm_head_->forward(h) : torch::matmul(h, model_->embed_tokens->weight.t());
}

}  // namespace diloco::inner
