// Llama-style decoder: forward pass and initialization.
#include "inner/models/llama.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>

#include "inner/models/attention.h"

namespace diloco::inner {
namespace {

torch::nn::Linear linear(int in, int out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }

// Pairs (i, i + d/2) rotate together, as Hugging Face's rotate_half does.
torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

}  // namespace

torch::Tensor rope_inverse_frequencies(const ModelConfig& c, int head_dim) {
  const auto inv = torch::pow(c.rope_theta, -torch::arange(0, head_dim, 2, torch::kDouble) / static_cast<double>(head_dim));
  if (c.rope_scaling.type != "llama3") return inv;
  // Llama 3.1: long wavelengths divided by `factor`, short ones kept, the
  // band between interpolated (Hugging Face's _compute_llama3_parameters).
  const auto& s = c.rope_scaling;
  const double old_context = s.original_max_positions;
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const auto wavelen = 2.0 * M_PI / inv;
  const auto stretched = torch::where(wavelen > low_freq_wavelen, inv / s.factor, inv);
  const auto smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1.0 - smooth) * stretched / s.factor + smooth * stretched;
  const auto medium = wavelen.ge(high_freq_wavelen).logical_and(wavelen.le(low_freq_wavelen));
  return torch::where(medium, smoothed, stretched);
}

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
                                          const torch::Tensor& mask, KvCache* cache, std::size_t layer) {
  const auto B = x.size(0);
  const auto T = x.size(1);
  auto q = q_proj_->forward(x).view({B, T, n_heads_, head_dim_}).transpose(1, 2);
  auto k = k_proj_->forward(x).view({B, T, n_kv_heads_, head_dim_}).transpose(1, 2);
  auto v = v_proj_->forward(x).view({B, T, n_kv_heads_, head_dim_}).transpose(1, 2);
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;
  if (cache) std::tie(k, v) = cache->append(layer, k, v);
  if (n_kv_heads_ != n_heads_) {  // each key/value head serves a group of query heads
    k = k.repeat_interleave(n_heads_ / n_kv_heads_, 1);
    v = v.repeat_interleave(n_heads_ / n_kv_heads_, 1);
  }
  const auto y = causal_attention(q, k, v, mask);
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
  input_layernorm_ = register_module("input_layernorm", RmsNorm(c.d_model, c.norm_eps));
  self_attn_ = register_module("self_attn", LlamaAttention(c));
  post_attention_layernorm_ = register_module("post_attention_layernorm", RmsNorm(c.d_model, c.norm_eps));
  mlp_ = register_module("mlp", LlamaMlp(c));
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                      const torch::Tensor& mask, KvCache* cache, std::size_t layer) {
  auto h = x + self_attn_->forward(input_layernorm_->forward(x), cos, sin, mask, cache, layer);
  return h + mlp_->forward(post_attention_layernorm_->forward(h));
}

LlamaBodyImpl::LlamaBodyImpl(const ModelConfig& c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab, c.d_model));
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < c.n_layers; ++i) layers_->push_back(LlamaBlock(c));
  norm_ = register_module("norm", RmsNorm(c.d_model, c.norm_eps));
  // Rotary tables for every position up to seq_len: angle t * theta^(-2i/d).
  inv_freq_ = rope_inverse_frequencies(c, c.d_model / c.n_heads);
  const auto angles = torch::outer(torch::arange(c.seq_len, torch::kDouble), inv_freq_);
  const auto both = torch::cat({angles, angles}, -1);
  cos_ = register_buffer("rope_cos", both.cos().to(torch::kFloat));
  sin_ = register_buffer("rope_sin", both.sin().to(torch::kFloat));
  mask_ = register_buffer("mask", torch::ones({c.seq_len, c.seq_len}, torch::kBool).triu(1));
}

std::pair<torch::Tensor, torch::Tensor> LlamaBodyImpl::rope(std::int64_t start, std::int64_t T,
                                                             const torch::Device& device) {
  if (start + T <= cos_.size(0)) return {cos_.slice(0, start, start + T), sin_.slice(0, start, start + T)};
  // Past seq_len (sampling a longer context): the same double-precision angles.
  const auto angles = torch::outer(torch::arange(start, start + T, torch::kDouble), inv_freq_);
  const auto both = torch::cat({angles, angles}, -1);
  return {both.cos().to(torch::kFloat).to(device), both.sin().to(torch::kFloat).to(device)};
}

torch::Tensor LlamaBodyImpl::forward(const torch::Tensor& tokens, KvCache* cache) {
  const auto T = tokens.size(1);
  const std::int64_t past = cache ? cache->length : 0;
  const auto [cos, sin] = rope(past, T, tokens.device());
  const auto mask = cache || T > mask_.size(0) ? causal_mask(past, T, tokens.device())
                                                : mask_.slice(0, 0, T).slice(1, 0, T);
  auto x = embed_tokens->forward(tokens);
  std::size_t i = 0;
  for (const auto& layer : *layers_) x = layer->as<LlamaBlock>()->forward(x, cos, sin, mask, cache, i++);
  if (cache) cache->length += T;
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

torch::Tensor LlamaImpl::forward(const torch::Tensor& tokens, KvCache* cache) {
  const auto h = model_->forward(tokens, cache);
  return lm_head_ ? lm_head_->forward(h) : torch::matmul(h, model_->embed_tokens->weight.t());
}

}  // namespace diloco::inner
