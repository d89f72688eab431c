// The Llama-style model behind the Model seam: shapes and names, causality,
// grouped-query attention, tied and untied heads, parameter counts, and an
// inner loop that learns with it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "fixtures.h"
#include "inner/inner_loop.h"
#include "inner/inner_optimizer.h"
#include "inner/models/model.h"
#include "inner/models/safetensors.h"

using namespace diloco::inner;
using namespace diloco::inner::testing;

namespace {

ModelConfig tiny_llama(int kv_heads = 2, bool tied = true) {
  ModelConfig c;
  c.kind = ModelKind::kLlama;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = kv_heads;
  c.seq_len = 16;
  c.tie_embeddings = tied;
  return c;
}

long long built_count(Model& m) {
  long long n = 0;
  for (const auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST(LlamaTest, LogitsShapeAndHuggingFaceNames) {
  torch::manual_seed(0);
  auto model = make_model(tiny_llama());
  const auto logits = model->logits(torch::randint(0, 256, {3, 16}, torch::kLong));
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{3, 16, 256}));
  std::map<std::string, torch::Tensor> params;
  for (auto& [name, p] : model->named_parameters()) params[name] = p;
  EXPECT_EQ(params.count("model.embed_tokens.weight"), 1u);
  EXPECT_EQ(params.count("model.layers.1.self_attn.q_proj.weight"), 1u);
  EXPECT_EQ(params.count("model.layers.0.mlp.gate_proj.weight"), 1u);
  EXPECT_EQ(params.count("model.layers.0.post_attention_layernorm.weight"), 1u);
  EXPECT_EQ(params.count("model.norm.weight"), 1u);
  EXPECT_EQ(params.count("lm_head.weight"), 0u);
  // Grouped-query attention: 2 key/value heads of 8 for 4 query heads.
  EXPECT_EQ(params["model.layers.0.self_attn.k_proj.weight"].sizes(), (std::vector<std::int64_t>{16, 32}));
  EXPECT_EQ(params["model.layers.0.self_attn.q_proj.weight"].sizes(), (std::vector<std::int64_t>{32, 32}));
  for (const auto& [name, p] : params) EXPECT_EQ(name.find("bias"), std::string::npos) << name;
  EXPECT_EQ(model->layer_of("model.layers.1.mlp.up_proj.weight"), "model.layers.1");
  EXPECT_EQ(model->layer_of("model.embed_tokens.weight"), "model.embed_tokens");
  EXPECT_EQ(model->layer_of("lm_head.weight"), "lm_head");
}

TEST(LlamaTest, LaterTokensDoNotChangeEarlierLogits) {
  torch::manual_seed(1);
  auto model = make_model(tiny_llama());
  torch::NoGradGuard no_grad;
  auto a = torch::randint(0, 256, {1, 16}, torch::kLong);
  auto b = a.clone();
  b.index_put_({0, 10}, (a.index({0, 10}).item<std::int64_t>() + 1) % 256);
  const auto la = model->logits(a);
  const auto lb = model->logits(b);
  EXPECT_TRUE(torch::allclose(la.slice(1, 0, 10), lb.slice(1, 0, 10)));
  EXPECT_FALSE(torch::allclose(la.slice(1, 10, 11), lb.slice(1, 10, 11)));
}

TEST(LlamaTest, RotaryPositionsMakeOrderMatter) {
  // With no position embeddings, attention over a set of earlier tokens is
  // blind to their order unless rotary encoding tells positions apart.
  torch::manual_seed(2);
  auto model = make_model(tiny_llama());
  torch::NoGradGuard no_grad;
  const auto ab = model->logits(torch::tensor({5, 9, 7}, torch::kLong).view({1, 3}));
  const auto ba = model->logits(torch::tensor({9, 5, 7}, torch::kLong).view({1, 3}));
  EXPECT_FALSE(torch::allclose(ab.select(1, 2), ba.select(1, 2), 1e-4, 1e-5));
}

TEST(LlamaTest, UntiedHeadHasItsOwnWeights) {
  torch::manual_seed(3);
  auto tied = make_model(tiny_llama(4, true));
  torch::manual_seed(3);
  auto untied = make_model(tiny_llama(4, false));
  EXPECT_EQ(untied->named_parameters().back().first, "lm_head.weight");
  EXPECT_EQ(built_count(*untied) - built_count(*tied), 256 * 32);
}

TEST(LlamaTest, ParameterCountFormulaMatchesTheBuiltModels) {
  for (auto c : {tiny_llama(), tiny_llama(4, false), tiny_llama(1, true), tiny()}) {
    torch::manual_seed(0);
    auto model = make_model(c);
    EXPECT_EQ(parameter_count(c), built_count(*model)) << model->signature();
  }
}

// What the planner counts as Muon's (one momentum buffer each) is what
// the inner optimizer hands to Muon on the built model.
TEST(LlamaTest, MuonParameterCountFormulaMatchesWhatMuonTrains) {
  for (auto c : {tiny_llama(), tiny_llama(4, false), tiny_llama(1, true), tiny()}) {
    torch::manual_seed(0);
    auto model = make_model(c);
    long long muon = 0;
    for (const auto& [name, p] : model->named_parameters())
      if (muon_trains(name, p)) muon += p.numel();
    EXPECT_EQ(muon_parameter_count(c), muon) << model->signature();
    EXPECT_GT(muon, 0);
  }
}

TEST(LlamaTest, BadShapesAreRefusedNamingTheKey) {
  auto c = tiny_llama(3);
  EXPECT_THROW(
      {
        try {
          make_model(c);
        } catch (const ModelError& e) {
          EXPECT_NE(std::string(e.what()).find("model.n_kv_heads (3) must divide model.n_heads (4)"), std::string::npos);
          throw;
        }
      },
      ModelError);
}

TEST(LlamaTest, InnerLoopLearnsWithLlama) {
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  data.batch_size = 8;
  InnerLoop loop(tiny_llama(), fast(), data, corpus, {}, group, 3, 60);
  EXPECT_EQ(loop.num_params(), static_cast<std::size_t>(parameter_count(tiny_llama())));
  EXPECT_EQ(loop.model_signature().rfind("llama vocab=256 d_model=32 n_layers=2", 0), 0u) << loop.model_signature();
  const auto layers = loop.layers();
  ASSERT_EQ(layers.size(), 4u);  // embeddings, two blocks, final norm
  EXPECT_EQ(layers[1].name, "model.layers.0");
  const double before = loop.eval_loss(32);
  EXPECT_NEAR(before, std::log(256.0), 0.1);
  loop.run(60);
  EXPECT_LT(loop.eval_loss(32), before - 1.5);
}

// Weights out and back in: a safetensors file written from one loop's
// parameters makes another loop (another seed) hold the very same bits.
TEST(LlamaTest, SafetensorsRoundTripIsBitIdentical) {
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  InnerLoop a(tiny_llama(), fast(), data, corpus, {}, group, 11, 10);
  a.run(3);
  std::vector<NamedTensor> tensors;
  std::size_t offset = 0;
  const auto params = a.params();
  for (const auto& [name, shape] : a.parameter_shapes()) {
    std::size_t count = 1;
    for (auto d : shape) count *= static_cast<std::size_t>(d);
    tensors.push_back({name, shape, params.subspan(offset, count)});
    offset += count;
  }
  const std::string path = ::testing::TempDir() + "/llama_roundtrip.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}});
  InnerLoop b(tiny_llama(), fast(), data, corpus, {}, group, 12, 10);
  ASSERT_NE(std::memcmp(a.params().data(), b.params().data(), params.size_bytes()), 0);
  b.load_weights(path);
  EXPECT_EQ(std::memcmp(a.params().data(), b.params().data(), params.size_bytes()), 0);
  // A file for another shape changes nothing and names what does not fit.
  auto wide = tiny_llama();
  wide.d_model = 64;
  InnerLoop c(wide, fast(), data, corpus, {}, group, 13, 10);
  const std::vector<float> before(c.params().begin(), c.params().end());
  try {
    c.load_weights(path);
    ADD_FAILURE() << "no error";
  } catch (const WeightsError& e) {
    EXPECT_NE(std::string(e.what()).find("shapes differ: model.embed_tokens.weight (file [256, 32], model [256, 64])"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(std::memcmp(before.data(), c.params().data(), before.size() * sizeof(float)), 0);
}

// F16 and BF16 tensors convert exactly (as Hugging Face files often hold them).
TEST(SafetensorsTest, HalfWidthTensorsConvertExactly) {
  const std::string json = R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
                           R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]}})";
  const std::uint16_t data[] = {0x3C00, 0xC000, 0x0001, 0x3F80, 0xC040};  // 1, -2, 2^-24 | 1, -3
  const std::uint64_t len = json.size();
  const std::string path = ::testing::TempDir() + "/half.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << json;
    out.write(reinterpret_cast<const char*>(data), sizeof(data));
  }
  const SafetensorsFile file(path);
  EXPECT_EQ(file.to_floats("h"), (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(file.to_floats("b"), (std::vector<float>{1.0f, -3.0f}));
}
