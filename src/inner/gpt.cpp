// GPT forward pass and GPT-2 style initialization.
#include "inner/gpt.h"

#include <cmath>
#include <tuple>

#include "inner/models/attention.h"

namespace diloco::inner {

namespace {

// ATen's linear, as Python's nn.Linear calls it: for a contiguous 3-D input
// one addmm (bias fused) on the flattened rows. The C++ module's forward
// takes its own path there (matmul, then += bias): a separate add_ per
// layer, and a backward through matmul's folding that costs select and
// resolve_conj calls Python's loop never makes (bench/profile_step.py).
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return torch::linear(x, layer->weight, layer->bias);
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& c) : n_heads_(c.n_heads) {
  qkv_ = register_module("qkv", torch::nn::Linear(c.d_model, 3 * c.d_model));
  proj_ = register_module("proj", torch::nn::Linear(c.d_model, c.d_model));
  mask_ = register_buffer("mask", torch::ones({c.seq_len, c.seq_len}, torch::kBool).triu(1));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, KvCache* cache, std::size_t layer) {
  const auto B = x.size(0);
  const auto T = x.size(1);
  const auto C = x.size(2);
  const auto head_dim = C / n_heads_;
  // split along the features, not three selects of a [B, T, 3, H, d] view:
  // split's backward concatenates the three gradients straight into the
  // [B, T, 3C] layout the product's backward reads, where each select's
  // backward fills a zero tensor the size of all three and adds them, and
  // unbind's stacks them in another order that takes one more copy
  // (measured by bench/profile_step.py).
  const auto qkv = linear(qkv_, x).split(C, -1);
  const auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_heads_, head_dim}).transpose(1, 2); };
  const auto q = heads(qkv[0]);
  auto k = heads(qkv[1]);
  auto v = heads(qkv[2]);
  torch::Tensor mask;
  if (cache) {
    mask = causal_mask(cache->length, T, x.device());
    std::tie(k, v) = cache->append(layer, k, v);
  } else {
    mask = mask_.slice(0, 0, T).slice(1, 0, T);
  }
  const auto y = causal_attention(q, k, v, mask);
  return linear(proj_, y.transpose(1, 2).reshape({B, T, C}));
}

BlockImpl::BlockImpl(const ModelConfig& c) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  attn_ = register_module("attn", CausalSelfAttention(c));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  fc_ = register_module("fc", torch::nn::Linear(c.d_model, 4 * c.d_model));
  out_ = register_module("out", torch::nn::Linear(4 * c.d_model, c.d_model));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, KvCache* cache, std::size_t layer) {
  auto h = x + attn_->forward(ln1_->forward(x), cache, layer);
  return h + linear(out_, torch::gelu(linear(fc_, ln2_->forward(h))));
}

GptImpl::GptImpl(const ModelConfig& c) : config_(c) {
  token_embedding_ = register_module("token_embedding", torch::nn::Embedding(c.vocab, c.d_model));
  position_embedding_ = register_module("position_embedding", torch::nn::Embedding(c.seq_len, c.d_model));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < c.n_layers; ++i) blocks_->push_back(Block(c));
  ln_final_ = register_module("ln_final", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));

  // GPT-2 initialization: N(0, 0.02), residual projections scaled by 1/sqrt(2L).
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * c.n_layers);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (name.find("ln") != std::string::npos) {
      if (name.ends_with("weight")) p.fill_(1.0); else p.zero_();
    } else if (name.ends_with("bias")) {
      p.zero_();
    } else if (name.ends_with("proj.weight") || name.ends_with("out.weight")) {
      p.normal_(0.0, residual_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& tokens, KvCache* cache) {
  const auto T = tokens.size(1);
  const std::int64_t past = cache ? cache->length : 0;
  auto positions = torch::arange(past, past + T, torch::TensorOptions().dtype(torch::kLong).device(tokens.device()));
  auto x = token_embedding_->forward(tokens) + position_embedding_->forward(positions);
  std::size_t i = 0;
  for (const auto& block : *blocks_) x = block->as<Block>()->forward(x, cache, i++);
  if (cache) cache->length += T;
  x = ln_final_->forward(x);
  // Output head tied to the token embedding.
  return torch::matmul(x, token_embedding_->weight.t());
}

torch::Tensor GptImpl::loss(const torch::Tensor& inputs, const torch::Tensor& targets) {
  auto logits = forward(inputs);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, config_.vocab}), targets.reshape({-1}));
}

}  // namespace diloco::inner
