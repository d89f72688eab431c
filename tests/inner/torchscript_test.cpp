// TorchScript models behind the Model seam, against files scripts/export_model.py
// wrote (paths in DILOCO_TS_GPT, DILOCO_TS_LLAMA; run_torchscript_test.sh
// writes them): the scripted byte GPT computes what the native one does, its
// layers and signature, and the inner loop learns with it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "fixtures.h"
#include "inner/inner_loop.h"
#include "inner/models/model.h"

using namespace diloco::inner;
using namespace diloco::inner::testing;

namespace {

std::string file(const char* var) {
  const char* v = std::getenv(var);
  return v ? v : "";
}

// The sizes run_torchscript_test.sh exports the byte GPT with.
ModelConfig native_gpt() {
  ModelConfig c;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.seq_len = 16;
  return c;
}

ModelConfig scripted(const std::string& path) {
  ModelConfig c = native_gpt();
  c.kind = ModelKind::kTorchScript;
  c.path = path;
  return c;
}

}  // namespace

TEST(TorchScriptTest, ScriptedGptMatchesTheNativeOneOnLossAndGradients) {
  const auto path = file("DILOCO_TS_GPT");
  if (path.empty()) GTEST_SKIP() << "DILOCO_TS_GPT not set (run through run_torchscript_test.sh)";
  torch::manual_seed(5);
  auto native = make_model(native_gpt());
  auto script = make_model(scripted(path));
  // Same weights: the native model's, copied by name.
  std::map<std::string, torch::Tensor> theirs;
  for (auto& [name, p] : script->named_parameters()) theirs[name] = p;
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : native->named_parameters()) {
      ASSERT_EQ(theirs.count(name), 1u) << name;
      ASSERT_EQ(theirs[name].sizes(), p.sizes()) << name;
      theirs[name].copy_(p);
    }
  }
  ASSERT_EQ(theirs.size(), native->named_parameters().size());
  const auto tokens = torch::randint(0, 256, {4, 17}, torch::kLong);
  const auto inputs = tokens.slice(1, 0, 16), targets = tokens.slice(1, 1, 17);
  auto a = native->loss(inputs, targets);
  auto b = script->loss(inputs, targets);
  a.backward();
  b.backward();
  EXPECT_NEAR(a.item<double>(), b.item<double>(), 1e-5 * std::abs(a.item<double>()));
  for (auto& [name, p] : native->named_parameters()) {
    const auto& g = theirs[name].grad();
    ASSERT_TRUE(g.defined()) << name;
    const double scale = p.grad().abs().max().item<double>() + 1e-12;
    EXPECT_LE((g - p.grad()).abs().max().item<double>() / scale, 1e-4) << name;
  }
}

TEST(TorchScriptTest, LayersSignatureAndLearning) {
  const auto path = file("DILOCO_TS_LLAMA");
  if (path.empty()) GTEST_SKIP() << "DILOCO_TS_LLAMA not set (run through run_torchscript_test.sh)";
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  data.batch_size = 8;
  auto c = scripted(path);
  InnerLoop loop(c, fast(), data, corpus, {}, group, 3, 60);
  EXPECT_EQ(loop.model_signature().rfind("torchscript vocab=256 layout=", 0), 0u) << loop.model_signature();
  const auto layers = loop.layers();
  ASSERT_EQ(layers.size(), 4u);  // model.embed_tokens, model.layers.0, model.layers.1, model.norm
  EXPECT_EQ(layers[1].name, "model.layers.0");
  EXPECT_EQ(layers[3].name, "model.norm");
  const double before = loop.eval_loss(32);
  loop.run(60);
  EXPECT_LT(loop.eval_loss(32), before - 1.0);
}

TEST(TorchScriptTest, BadFilesNameTheProblem) {
  auto expect_error = [](ModelConfig c, const std::string& needle) {
    try {
      make_model(c);
      ADD_FAILURE() << "no error for " << c.path;
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(scripted("/nonexistent/model.pt"), "model.path: /nonexistent/model.pt: no such file");
  expect_error(scripted(std::string(DILOCO_SOURCE_DIR) + "/recipes/quickstart.toml"), "not a TorchScript file");
  const auto path = file("DILOCO_TS_GPT");
  if (path.empty()) return;
  auto wide = scripted(path);
  wide.vocab = 300;
  expect_error(wide, "index out of range");
}
