// The byte GPT: shapes, parameter count, loss at init, causality.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "inner/gpt.h"

using diloco::inner::Gpt;
using diloco::inner::ModelConfig;

namespace {

ModelConfig small() {
  ModelConfig c;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.seq_len = 16;
  return c;
}

}  // namespace

TEST(GptTest, LogitsHaveBatchTimeVocabShape) {
  torch::manual_seed(0);
  Gpt model(small());
  auto tokens = torch::randint(0, 256, {3, 16}, torch::kLong);
  auto logits = model->forward(tokens);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 16, 256}));
  // Shorter sequences than the context work too.
  EXPECT_EQ(model->forward(tokens.slice(1, 0, 5)).sizes(), (std::vector<int64_t>{3, 5, 256}));
}

TEST(GptTest, ParameterCountFollowsTheArchitecture) {
  const auto c = small();
  Gpt model(c);
  std::int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  const std::int64_t d = c.d_model;
  const std::int64_t per_block = 2 * 2 * d            // two LayerNorms
                                 + d * 3 * d + 3 * d  // qkv
                                 + d * d + d          // attention projection
                                 + d * 4 * d + 4 * d  // MLP in
                                 + 4 * d * d + d;     // MLP out
  const std::int64_t expected = 256 * d + c.seq_len * d + c.n_layers * per_block + 2 * d;  // tied head
  EXPECT_EQ(n, expected);
}

TEST(GptTest, LossAtInitIsCloseToUniformOverBytes) {
  torch::manual_seed(1);
  Gpt model(small());
  auto tokens = torch::randint(0, 256, {8, 17}, torch::kLong);
  const double loss = model->loss(tokens.slice(1, 0, 16), tokens.slice(1, 1, 17)).item<double>();
  EXPECT_NEAR(loss, std::log(256.0), 0.05);
}

TEST(GptTest, FutureTokensDoNotChangeEarlierLogits) {
  torch::manual_seed(2);
  Gpt model(small());
  auto a = torch::randint(0, 256, {1, 16}, torch::kLong);
  auto b = a.clone();
  b.index_put_({0, 10}, (a.index({0, 10}).item<int64_t>() + 1) % 256);
  torch::NoGradGuard no_grad;
  auto la = model->forward(a);
  auto lb = model->forward(b);
  EXPECT_TRUE(torch::equal(la.slice(1, 0, 10), lb.slice(1, 0, 10)));
  EXPECT_FALSE(torch::equal(la.slice(1, 10, 16), lb.slice(1, 10, 16)));
}

TEST(GptTest, SameSeedSameWeights) {
  torch::manual_seed(7);
  Gpt a(small());
  torch::manual_seed(7);
  Gpt b(small());
  auto pa = a->parameters();
  auto pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i]));
}
