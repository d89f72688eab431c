// The planner's memory model: what each part of a rank's memory depends on,
// and the advice when a rank does not fit. (Its numbers against real runs:
// tests/e2e/plan_check.sh.)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "plan/model/memory_model.h"

using namespace diloco::plan;
using diloco::inner::ModelConfig;
using diloco::inner::ModelKind;

namespace {

ModelConfig gpt(int d, int layers, int heads, int seq) {
  ModelConfig m;
  m.kind = ModelKind::kGpt;
  m.d_model = d;
  m.n_layers = layers;
  m.n_heads = heads;
  m.seq_len = seq;
  return m;
}

MemoryInputs inputs(double params) {
  MemoryInputs in;
  in.model = gpt(256, 4, 8, 128);
  in.params = params;
  in.batch = 16;
  in.sites = 3;
  in.runtime_bytes = 100e6;
  in.data_bytes = 10e6;
  return in;
}

}  // namespace

TEST(PlanMemoryTest, GptActivationsCountTheSavedTensorsOfEveryLayerAndTheLogits) {
  const auto m = gpt(64, 2, 4, 32);
  const double tokens = 8 * 32;
  // 16 d-vectors and the softmax's scores (heads x keys) per token and layer, fp32;
  // the final LayerNorm's input and output, the logits, log-softmax and the logits' gradient.
  const double expected = 2 * tokens * 4.0 * (16 * 64 + 4 * 32) + tokens * (8.0 * 64 + 12.0 * 256);
  EXPECT_DOUBLE_EQ(activation_bytes(m, 8, false), expected);
}

TEST(PlanMemoryTest, ActivationsGrowWithBatchAndShrinkUnderBf16AndGroupedQueryAttention) {
  const auto m = gpt(256, 4, 8, 128);
  EXPECT_DOUBLE_EQ(activation_bytes(m, 32, false), 2.0 * activation_bytes(m, 16, false));
  EXPECT_LT(activation_bytes(m, 16, true), activation_bytes(m, 16, false));
  auto llama = m;
  llama.kind = ModelKind::kLlama;
  auto gqa = llama;
  gqa.n_kv_heads = 2;
  EXPECT_LT(activation_bytes(gqa, 16, false), activation_bytes(llama, 16, false));
  EXPECT_GT(activation_bytes(llama, 16, false), activation_bytes(m, 16, false));  // SwiGLU and RoPE keep more
  auto scripted = m;
  scripted.kind = ModelKind::kTorchScript;
  EXPECT_LT(activation_bytes(scripted, 16, false), 0.0);
}

// Muon keeps one momentum buffer for each parameter it trains (the blocks'
// matrices), AdamW two moments for the rest.
TEST(PlanMemoryTest, MuonKeepsOneBufferWhereAdamWKeepsTwo) {
  auto in = inputs(1e6);
  const double adamw = estimate_memory(in).adam;
  in.muon_params = 7e5;
  EXPECT_DOUBLE_EQ(estimate_memory(in).adam, 8.0 * 3e5 + 4.0 * 7e5);
  EXPECT_DOUBLE_EQ(adamw - estimate_memory(in).adam, 4.0 * 7e5);
}

TEST(PlanMemoryTest, OnlyLeadersHoldTheOuterStateAndLossyCodecsAddTheirResidual) {
  const double p = 1e6;
  auto in = inputs(p);
  const auto lead = estimate_memory(in);
  EXPECT_DOUBLE_EQ(lead.weights + lead.grads + lead.adam, 16.0 * p);
  EXPECT_DOUBLE_EQ(lead.outer, 12.0 * p);  // global parameters, pseudo-gradient, momentum
  // codec none: its own 4-byte copy and a part (at most part_bytes) of each of the 3 sites' payloads
  EXPECT_NEAR(lead.exchange, 4.0 * p + 3 * 4.0 * p, 1e3);  // and each payload's header
  in.leader = false;
  const auto other = estimate_memory(in);
  EXPECT_DOUBLE_EQ(other.outer + other.exchange, 0.0);
  EXPECT_DOUBLE_EQ(other.device(), lead.device());
  in.leader = true;
  in.codec = "int8";
  in.error_feedback = true;
  const auto int8 = estimate_memory(in);
  EXPECT_DOUBLE_EQ(int8.outer, 16.0 * p);
  EXPECT_LT(int8.exchange, 0.5 * lead.exchange);
  in.overlap = "delayed";
  EXPECT_DOUBLE_EQ(estimate_memory(in).outer, 20.0 * p);  // and the round-start copy
  in.momentum = false;
  EXPECT_DOUBLE_EQ(estimate_memory(in).outer, 16.0 * p);
}

TEST(PlanMemoryTest, ARecommendedLossyCodecKeepsAResidualAsTrainingWould) {
  EXPECT_TRUE(error_feedback_for("int4", "none", false));  // the recipe's false was none's default
  EXPECT_FALSE(error_feedback_for("int4", "int8", false));  // set off for a lossy codec: carried over
  EXPECT_TRUE(error_feedback_for("int4", "int8", true));
  EXPECT_FALSE(error_feedback_for("none", "int8", true));
}

TEST(PlanMemoryTest, ACudaRankKeepsTheModelOnTheGpuAndAHostCopyForStaging) {
  auto in = inputs(1e6);
  in.cuda = true;
  in.bf16 = true;
  const auto e = estimate_memory(in);
  EXPECT_DOUBLE_EQ(e.autocast, 2e6);
  EXPECT_DOUBLE_EQ(e.total(), e.host());
  EXPECT_DOUBLE_EQ(e.outer, 16e6);  // the staging copy and the leader's 12 bytes a parameter
  EXPECT_DOUBLE_EQ(e.allocator, 0.0);
}

TEST(PlanMemoryTest, ACpuRankAddsWhatTheHostBlockCacheKeepsOfFreedActivations) {
  auto in = inputs(1e6);  // 4 layers: two of them
  const auto e = estimate_memory(in);
  EXPECT_DOUBLE_EQ(e.allocator, 0.5 * e.activations);
  in.model.n_layers = 2;  // all of them
  EXPECT_DOUBLE_EQ(estimate_memory(in).allocator, estimate_memory(in).activations);
  in.model.n_layers = 8;
  EXPECT_DOUBLE_EQ(estimate_memory(in).allocator, 0.25 * estimate_memory(in).activations);
  EXPECT_DOUBLE_EQ(e.total(), e.device() + e.runtime + e.data + e.outer + e.exchange + e.allocator);
}

TEST(PlanMemoryTest, AdviceNamesTheLargestBatchThatFits) {
  auto in = inputs(1e6);
  const auto e = estimate_memory(in);
  EXPECT_EQ(memory_advice(in, e, e.total() + 1.0), "");
  const double per_sequence = (e.activations + e.allocator) / in.batch;
  const double limit = e.total() - 5.5 * per_sequence;  // 10 sequences fit, 11 do not
  const std::string advice = memory_advice(in, e, limit);
  EXPECT_NE(advice.find("data.batch_size = 10 fits"), std::string::npos) << advice;
  // Nothing fits when the weights and optimizer alone are too large.
  const std::string none = memory_advice(in, e, e.total() - e.activations - e.allocator - 1.0);
  EXPECT_NE(none.find("the weights, gradients and AdamW state alone need"), std::string::npos) << none;
  in.cuda = true;
  const auto gpu = estimate_memory(in);
  in.bf16 = false;
  const std::string bf16 = memory_advice(in, gpu, gpu.device() - 0.1 * gpu.activations);
  EXPECT_NE(bf16.find("inner.precision = \"bf16\" fits"), std::string::npos) << bf16;
}

TEST(PlanMemoryTest, DataBytesAreFourBytesATextByteAndShardsOnlyTheirReadBuffers) {
  const auto dir = std::filesystem::temp_directory_path() / "plan_memory_test_data";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.txt") << std::string(1000, 'a');
  std::ofstream(dir / "b.txt") << std::string(500, 'b');
  EXPECT_DOUBLE_EQ(data_bytes_of({dir.string()}, false, 8, 64), 6000.0);
  // Shards are read with pread a window at a time: a descriptor per file and
  // 8 windows of 65 ids (as read, at most 4 bytes, and as int64).
  const double buffers = 8 * 65 * 12.0;
  EXPECT_DOUBLE_EQ(data_bytes_of({(dir / "a.txt").string()}, true, 8, 64), 256.0 + buffers);
  std::ofstream(dir / "s.bin") << std::string(300, 's');
  EXPECT_DOUBLE_EQ(data_bytes_of({dir.string()}, true, 8, 64), 256.0 + buffers);  // a folder: its *.bin files
  // 10 GB of shards (sparse: no disk used) cost what 300 bytes do.
  std::filesystem::resize_file(dir / "s.bin", 10'000'000'000);
  EXPECT_DOUBLE_EQ(data_bytes_of({dir.string()}, true, 8, 64), 256.0 + buffers);
  EXPECT_DOUBLE_EQ(data_bytes_of({(dir / "missing").string()}, true, 8, 64), buffers);
  std::filesystem::remove_all(dir);
  EXPECT_GT(resident_bytes(), 0.0);
}
