// Device choice, host staging of the parameters, and bf16 autocast. The
// staging path (always taken on CUDA) is forced on the CPU with stage_params,
// so its bookkeeping is tested here; CUDA itself is tested only where a GPU is.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "inner/inner_loop.h"
#include "fixtures.h"

using namespace diloco::inner;
using namespace diloco::inner::testing;

namespace {

DataConfig small_batches() {
  DataConfig d;
  d.batch_size = 4;
  return d;
}

// What the outer loop does to the parameters between rounds: reads them and
// writes new values (here: halfway back to where they started).
void outer_step(InnerLoop& loop, const std::vector<float>& start) {
  auto p = loop.params();
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.5f * (p[i] + start[i]);
}

}  // namespace

TEST(ChooseDeviceTest, CpuAutoAndCuda) {
  EXPECT_FALSE(choose_device(DeviceSetting::kCpu, 4, 1).cuda);
  EXPECT_FALSE(choose_device(DeviceSetting::kAuto, 0, 3).cuda);
  const auto autod = choose_device(DeviceSetting::kAuto, 4, 6);
  EXPECT_TRUE(autod.cuda);
  EXPECT_EQ(autod.index, 2);  // local rank 6 on a node with 4 GPUs
  const auto cuda = choose_device(DeviceSetting::kCuda, 8, 3);
  EXPECT_TRUE(cuda.cuda);
  EXPECT_EQ(cuda.index, 3);
  try {
    choose_device(DeviceSetting::kCuda, 0, 0);
    FAIL() << "cuda without a GPU must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(HostStagingTest, StagedParametersTrainBitForBitLikeTheLiveBuffer) {
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DeviceConfig staged;
  staged.stage_params = true;
  InnerLoop live(tiny(2), fast(), small_batches(), corpus, {}, group, 5, 40);
  InnerLoop copy(tiny(2), fast(), small_batches(), corpus, {}, group, 5, 40, staged);
  const auto live_start = live.params();
  const std::vector<float> start(live_start.begin(), live_start.end());
  for (int round = 0; round < 3; ++round) {
    live.run(4);
    copy.run(4);
    outer_step(live, start);
    outer_step(copy, start);  // written into the host copy, pushed before the next step
  }
  EXPECT_DOUBLE_EQ(live.eval_loss(8), copy.eval_loss(8));
  live.run(2);
  copy.run(2);
  const auto a = live.params();
  const auto b = copy.params();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0);
}

TEST(HostStagingTest, HostCopyIsSeparateMemoryAndFollowsTheModel) {
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DeviceConfig staged;
  staged.stage_params = true;
  InnerLoop loop(tiny(2), fast(), small_batches(), corpus, {}, group, 9, 40, staged);
  const std::vector<float> before(loop.params().begin(), loop.params().end());
  loop.run(3);
  const auto after = loop.params();
  EXPECT_NE(std::memcmp(before.data(), after.data(), after.size_bytes()), 0) << "steps must show in the host copy";
  // A write to the host copy reaches the model: zero weights give a uniform
  // next-byte distribution, loss ln(256).
  std::fill(after.begin(), after.end(), 0.0f);
  EXPECT_NEAR(loop.eval_loss(8), std::log(256.0), 1e-4);
}

TEST(PrecisionTest, Bf16AutocastTrainsWithFp32MasterWeights) {
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DeviceConfig bf16;
  bf16.precision = Precision::kBf16;
  InnerLoop plain(tiny(2), fast(), small_batches(), corpus, {}, group, 3, 60);
  InnerLoop mixed(tiny(2), fast(), small_batches(), corpus, {}, group, 3, 60, bf16);
  const double start = mixed.eval_loss(16);
  EXPECT_NE(start, plain.eval_loss(16)) << "bf16 forward passes should round differently";
  const auto p = plain.run(40);
  const auto m = mixed.run(40);
  ASSERT_FALSE(m.diverged);
  const double end = mixed.eval_loss(16);
  EXPECT_LT(end, start - 0.5) << "bf16 training should learn";
  EXPECT_NEAR(m.mean_loss, p.mean_loss, 0.1 * p.mean_loss);
  // Master weights stay fp32: updates smaller than bf16's resolution survive.
  int not_bf16 = 0;
  for (float v : mixed.params()) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    not_bf16 += (bits & 0xffffu) != 0;
  }
  EXPECT_GT(not_bf16, static_cast<int>(mixed.num_params() / 2));
}

// Needs a GPU and a CUDA libtorch (scripts/gpu-check runs it there).
TEST(CudaTest, InnerStepsOnCudaFollowTheCpuAndStageThroughTheHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible to libtorch (CPU-only build or no GPU)";
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DeviceConfig gpu;
  gpu.cuda = true;
  InnerLoop cpu(tiny(2), fast(), small_batches(), corpus, {}, group, 4, 40);
  InnerLoop cuda(tiny(2), fast(), small_batches(), corpus, {}, group, 4, 40, gpu);
  const std::vector<float> start(cpu.params().begin(), cpu.params().end());
  {
    const auto on_gpu = cuda.params();
    ASSERT_EQ(std::memcmp(start.data(), on_gpu.data(), on_gpu.size_bytes()), 0) << "both start from the same weights";
  }
  cpu.run(5);
  cuda.run(5);
  outer_step(cpu, start);
  outer_step(cuda, start);
  cpu.run(5);
  cuda.run(5);
  const auto a = cpu.params();
  const auto b = cuda.params();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += a[i] * a[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-3) << "CUDA kernels round differently, but not by much";
  EXPECT_NEAR(cpu.eval_loss(8), cuda.eval_loss(8), 1e-2);
}

// run.threads bounds OpenBLAS's own threads too, where libtorch uses it:
// set to 1, then 2, OpenBLAS reports each (skipped where libtorch uses
// another BLAS).
TEST(DeviceTest, ComputeThreadsBoundOpenBlas) {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (!get) GTEST_SKIP() << "libtorch does not use OpenBLAS here";
  set_compute_threads(2);
  EXPECT_EQ(get(), 2);
  set_compute_threads(1);
  EXPECT_EQ(get(), 1);
}
