// Hugging Face interop and using a trained model: config.json both ways,
// model folders (sharded too) in and out, rotary settings that change the
// function, the key/value cache against the full forward, sampling and
// whole-stream evaluation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "fixtures.h"
#include "inner/data/memory_tokens.h"
#include "inner/evaluator.h"
#include "inner/models/hf_config.h"
#include "inner/models/hf_folder.h"
#include "inner/models/llama.h"
#include "inner/models/model.h"
#include "inner/models/weights.h"
#include "inner/sampler.h"
#include "temp_dir.h"

using namespace diloco::inner;
using namespace diloco::inner::testing;

namespace {

ModelConfig small_llama(bool tied = true) {
  ModelConfig c;
  c.kind = ModelKind::kLlama;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.seq_len = 24;
  c.tie_embeddings = tied;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

std::vector<NamedTensor> tensors_of(Model& m, std::vector<std::vector<float>>& keep) {
  std::vector<NamedTensor> out;
  for (auto& [name, p] : m.named_parameters()) {
    const auto c = p.contiguous();
    keep.emplace_back(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    out.push_back({name, std::vector<std::int64_t>(p.sizes().begin(), p.sizes().end()), keep.back()});
  }
  return out;
}

}  // namespace

TEST(HfConfigTest, ReadsEveryLlamaField) {
  const auto c = parse_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3,
      "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 300,
      "rope_theta": 500000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}})", "c.json");
  EXPECT_EQ(c.kind, ModelKind::kLlama);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_layers, 3);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.ffn_hidden, 96);
  EXPECT_EQ(c.vocab, 300);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.max_positions, 4096);
  EXPECT_EQ(c.seq_len, kFolderSeqLenCap);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_positions, 8192);
  // Written back, it reads as the same model.
  const auto again = parse_hf_config(hf_config_json(c), "again");
  EXPECT_EQ(hf_config_json(again), hf_config_json(c));
  EXPECT_EQ(again.rope_scaling, c.rope_scaling);
}

TEST(HfConfigTest, RefusesWhatDilocoWouldComputeDifferently) {
  const std::string base = R"("model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 256)";
  const auto err = [&](const std::string& extra) {
    return error_of([&] { parse_hf_config("{" + base + extra + "}", "cfg.json"); });
  };
  EXPECT_NE(err(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})").find(
                "cfg.json: rope_scaling.rope_type \"yarn\" is not implemented"), std::string::npos);
  EXPECT_NE(err(R"(, "rope_scaling": {"type": "linear", "factor": 2.0})").find("rope_scaling.type \"linear\""),
            std::string::npos);
  EXPECT_NE(err(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0})").find("rope_scaling.low_freq_factor is missing"),
            std::string::npos);
  EXPECT_NE(err(R"(, "head_dim": 32)").find("head_dim"), std::string::npos);
  EXPECT_NE(err(R"(, "attention_bias": true)").find("attention_bias is true"), std::string::npos);
  EXPECT_NE(err(R"(, "hidden_act": "gelu")").find("hidden_act \"gelu\""), std::string::npos);
  EXPECT_NE(err(R"(, "num_key_value_heads": 3)").find("n_kv_heads (3) must divide"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_config(R"({"model_type": "qwen2"})", "q.json"); }).find("model_type \"qwen2\""),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_config(R"({"model_type": "llama", "hidden_size": 64})", "m.json"); })
                .find("m.json: num_hidden_layers is missing"), std::string::npos);
  // Left-out fields take LlamaConfig's defaults.
  const auto c = parse_hf_config("{" + base + "}", "cfg.json");
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.max_positions, 2048);
}

TEST(HfConfigTest, Llama3ScalingStretchesOnlyLongWavelengths) {
  auto c = small_llama();
  c.d_model = 128;
  c.n_heads = 2;  // head_dim 64: 32 frequencies
  c.rope_theta = 500000.0;
  const auto plain = rope_inverse_frequencies(c, 64);
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  const auto scaled = rope_inverse_frequencies(c, 64);
  for (int i = 0; i < 32; ++i) {
    const double f = plain[i].item<double>(), s = scaled[i].item<double>();
    const double wavelen = 2 * M_PI / f;
    if (wavelen < 64.0 / 4.0) EXPECT_EQ(s, f) << i;              // high frequencies kept
    else if (wavelen > 64.0) EXPECT_DOUBLE_EQ(s, f / 8.0) << i;  // low ones divided by the factor
    else {                                                       // the band between, interpolated
      const double smooth = (64.0 / wavelen - 1.0) / 3.0;
      EXPECT_NEAR(s, (1 - smooth) * f / 8.0 + smooth * f, 1e-15) << i;
    }
  }
}

TEST(HfConfigTest, ThetaEpsilonAndScalingChangeTheFunction) {
  const auto tokens = torch::randint(0, 256, {2, 24}, torch::kLong);
  const auto logits = [&](const ModelConfig& c) {
    torch::manual_seed(5);
    auto m = make_model(c);
    torch::NoGradGuard no_grad;
    return m->logits(tokens);
  };
  const auto base = logits(small_llama());
  auto theta = small_llama();
  theta.rope_theta = 500000.0;
  auto eps = small_llama();
  eps.norm_eps = 1e-1;
  auto scaled = small_llama();
  scaled.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 8};
  for (const auto& c : {theta, eps, scaled}) EXPECT_FALSE(torch::allclose(base, logits(c), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(base, logits(small_llama())));
}

TEST(KvCacheTest, IncrementalLogitsEqualTheFullForward) {
  auto gpt = tiny(2);
  gpt.seq_len = 24;
  for (const auto& c : {small_llama(), small_llama(false), gpt}) {
    torch::manual_seed(7);
    auto m = make_model(c);
    torch::NoGradGuard no_grad;
    const auto tokens = torch::randint(0, 256, {1, 20}, torch::kLong);
    const auto full = m->logits(tokens);
    KvCache cache;
    cache.capacity = m->context_length();
    std::vector<torch::Tensor> parts{m->logits_cached(tokens.slice(1, 0, 7), cache)};
    for (int t = 7; t < 20; ++t) parts.push_back(m->logits_cached(tokens.slice(1, t, t + 1), cache));
    EXPECT_EQ(cache.length, 20);
    EXPECT_TRUE(torch::allclose(full, torch::cat(parts, 1), 1e-5, 1e-5)) << m->signature();
  }
}

TEST(SamplerTest, GreedyWithCacheEqualsRecomputingAndSlidesPastTheContext) {
  torch::manual_seed(11);
  auto m = make_model(small_llama());
  SampleOptions o;
  o.temperature = 0.0;
  o.tokens = 60;  // past the context of 24: the window slides
  const std::vector<std::int64_t> prompt{72, 101, 108};
  const auto cached = sample(*m, prompt, o, torch::kCPU);
  o.use_cache = false;
  const auto full = sample(*m, prompt, o, torch::kCPU);
  ASSERT_EQ(cached.size(), 60u);
  EXPECT_EQ(cached, full);
  // Seeded sampling repeats itself and differs between seeds; top-k 1 is greedy.
  SampleOptions t;
  t.tokens = 30;
  t.temperature = 1.0;
  t.seed = 3;
  const auto a = sample(*m, prompt, t, torch::kCPU);
  EXPECT_EQ(a, sample(*m, prompt, t, torch::kCPU));
  t.seed = 4;
  EXPECT_NE(a, sample(*m, prompt, t, torch::kCPU));
  t.top_k = 1;
  o.tokens = 30;
  o.use_cache = true;
  EXPECT_EQ(sample(*m, prompt, t, torch::kCPU), sample(*m, prompt, o, torch::kCPU));
  EXPECT_THROW(sample(*m, {}, o, torch::kCPU), std::invalid_argument);
}

TEST(EvaluatorTest, EveryTokenAfterTheFirstIsPredictedOnceAcrossReplicas) {
  torch::manual_seed(13);
  auto m = make_model(small_llama());
  std::string text;
  for (int i = 0; i < 500; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  const auto data = bytes_dataset("t", text, 0.5);
  const auto& source = data.train();
  EvalWindows w;
  w.seq_len = 24;
  w.batch = 3;
  const auto one = evaluate(*m, source, w, torch::kCPU);
  EXPECT_EQ(one.tokens, static_cast<std::int64_t>(source.size()) - 1);
  // By hand: window k predicts ids kT+1 .. kT+T.
  std::vector<std::int64_t> ids(source.size());
  source.read(0, ids.size(), ids.data());
  double nats = 0.0;
  torch::NoGradGuard no_grad;
  for (std::size_t s = 0; s + 1 < ids.size(); s += 24) {
    const auto len = std::min<std::size_t>(24, ids.size() - 1 - s);
    const auto x = torch::tensor(std::vector<std::int64_t>(ids.begin() + s, ids.begin() + s + len + 1)).view({1, -1});
    const auto l = m->logits(x.slice(1, 0, -1));
    nats += torch::nn::functional::cross_entropy(l.view({-1, 256}).to(torch::kDouble), x.slice(1, 1).view({-1}),
                                                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
  }
  EXPECT_NEAR(one.nats, nats, 1e-9 * nats);
  EvalTotals split;
  for (int r = 0; r < 3; ++r) {
    w.replica = r;
    w.replicas = 3;
    const auto part = evaluate(*m, source, w, torch::kCPU);
    split.nats += part.nats;
    split.tokens += part.tokens;
  }
  EXPECT_EQ(split.tokens, one.tokens);
  EXPECT_NEAR(split.nats, one.nats, 1e-9 * nats);
}

TEST(ModelFolderTest, ShardedFolderRoundTripIsBitIdentical) {
  TempDir dir;
  torch::manual_seed(17);
  auto a = make_model(small_llama(false));
  std::vector<std::vector<float>> keep;
  ModelFolder folder;
  folder.config_json = hf_config_json(small_llama(false));
  folder.tensors = tensors_of(*a, keep);
  folder.max_shard_bytes = 20000;  // several shards
  const auto files = write_model_folder(dir.file("out"), folder);
  EXPECT_EQ(files.back(), "model.safetensors.index.json");
  EXPECT_GT(files.size(), 3u);
  EXPECT_TRUE(is_model_folder(dir.file("out")));
  EXPECT_EQ(read_hf_config(dir.file("out/config.json")).tie_embeddings, false);
  torch::manual_seed(18);
  auto b = make_model(small_llama(false));
  load_weights(*b, dir.file("out"));
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
  // Written again over itself: replaced whole, one file now.
  folder.max_shard_bytes = 1 << 30;
  EXPECT_EQ(write_model_folder(dir.file("out"), folder), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/model.safetensors.index.json")));
  // A shard the index names but that is gone is named.
  {
    std::ofstream(dir.file("out/model.safetensors.index.json"))
        << R"({"weight_map": {"model.norm.weight": "model-00009-of-00009.safetensors"}})";
  }
  EXPECT_NE(error_of([&] { open_folder_weights(dir.file("out")); }).find("model-00009-of-00009.safetensors: cannot open"),
            std::string::npos);
  // Not a model folder: refused, left alone.
  std::filesystem::create_directories(dir.file("other"));
  std::ofstream(dir.file("other/keep.txt")) << "x";
  EXPECT_NE(error_of([&] { write_model_folder(dir.file("other"), folder); }).find("is not a model folder"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir.file("other/keep.txt")));
}

TEST(SamplerTest, IdsStayBelowTheLimit) {
  torch::manual_seed(19);
  auto m = make_model(small_llama());
  SampleOptions o;
  o.tokens = 200;
  o.temperature = 5.0;  // nearly uniform: ids above the limit would appear
  o.id_limit = 100;
  for (auto id : sample(*m, {1, 2, 3}, o, torch::kCPU)) EXPECT_LT(id, 100);
}

// A tensor of a dtype that cannot be weights stops the load before any
// parameter is written, however late it comes in the model's order.
TEST(ModelFolderTest, AnUnusableDtypeChangesNothing) {
  TempDir dir;
  torch::manual_seed(21);
  auto a = make_model(small_llama());
  std::vector<std::vector<float>> keep;
  write_safetensors(dir.file("w.safetensors"), tensors_of(*a, keep));
  std::string blob;
  {
    std::ifstream in(dir.file("w.safetensors"), std::ios::binary);
    blob.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = blob.find("F32", blob.find("\"model.norm.weight\""));
  ASSERT_NE(at, std::string::npos);
  blob.replace(at, 3, "I32");  // same width: the file stays well formed
  std::ofstream(dir.file("w.safetensors"), std::ios::binary | std::ios::trunc) << blob;
  torch::manual_seed(22);
  auto b = make_model(small_llama());
  std::vector<torch::Tensor> before;
  for (auto& [name, p] : b->named_parameters()) before.push_back(p.clone());
  EXPECT_NE(error_of([&] { load_weights(*b, dir.file("w.safetensors")); }).find("'model.norm.weight' is I32"),
            std::string::npos);
  std::size_t i = 0;
  for (auto& [name, p] : b->named_parameters()) EXPECT_TRUE(torch::equal(p, before[i++])) << name;
}
