// The NCCL backend: the unique-id exchange over MPI runs anywhere NCCL was
// built (it needs no GPU); the collectives need a GPU per rank and are
// skipped, with the reason, where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/intra_site.h"
#include "comm/mpi_communicator.h"
#if defined(DILOCO_HAVE_NCCL)
#include <cuda_runtime.h>
#endif

using namespace diloco;

namespace {

#if defined(DILOCO_HAVE_NCCL)
// GPUs this rank can use, or a reason there are none.
int gpus(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    return 0;
  }
  if (count == 0) *why = "no CUDA device";
  return count;
}
#endif

}  // namespace

TEST(NcclTest, UniqueIdFromRankZeroReachesEveryRank) {
#if !defined(DILOCO_HAVE_NCCL)
  GTEST_SKIP() << "built without NCCL (CUDA toolkit or NCCL not found at configure time)";
#else
  auto world = comm::MpiCommunicator::world();
  const auto id = comm::share_nccl_id(*world);
  EXPECT_TRUE(std::any_of(id.begin(), id.end(), [](char c) { return c != 0; })) << "an all-zero id";
  auto all = world->all_gather(std::as_bytes(std::span<const char>(id)));
  for (int r = 0; r < world->size(); ++r) {
    ASSERT_EQ(all[r].size(), id.size());
    EXPECT_EQ(std::memcmp(all[r].data(), id.data(), id.size()), 0) << "rank " << r << " holds another id";
  }
  // A second id is a fresh one (duplicates of a communicator must not collide).
  const auto again = comm::share_nccl_id(*world);
  EXPECT_NE(std::memcmp(again.data(), id.data(), id.size()), 0);
#endif
}

TEST(NcclTest, AllReduceAndBroadcastOnDeviceMemory) {
#if !defined(DILOCO_HAVE_NCCL)
  GTEST_SKIP() << "built without NCCL";
#else
  auto world = comm::MpiCommunicator::world();
  std::string why;
  const int count = gpus(&why);
  // NCCL wants a GPU per rank (all ranks run on one node here).
  if (count > 0 && count < world->size())
    why = "needs a GPU per rank: " + std::to_string(world->size()) + " ranks, " + std::to_string(count) + " GPUs";
  // Every rank must agree to run or skip, or the ones that run would hang.
  double missing = why.empty() ? 0.0 : 1.0;
  world->all_reduce_sum(std::span<double>(&missing, 1));
  if (missing > 0) GTEST_SKIP() << (why.empty() ? "a rank has no CUDA device" : why);
  const int device = world->rank() % count;
  auto nccl = comm::make_nccl_communicator(*world, device, nullptr, nullptr);
  const std::size_t n = 1 << 20;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(world->rank() + 1) * static_cast<float>(i % 7);
  float* dev = nullptr;
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  nccl->all_reduce_sum(std::span<float>(dev, n));
  ASSERT_EQ(cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  const int size = world->size();
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  for (std::size_t i = 0; i < n; i += 4099) ASSERT_EQ(host[i], ranks_sum * static_cast<float>(i % 7)) << i;
  // Async form, then a broadcast from the last rank.
  nccl->all_reduce_sum_async(std::span<float>(dev, n))->wait();
  std::vector<float> mine(16, static_cast<float>(world->rank()));
  ASSERT_EQ(cudaMemcpy(dev, mine.data(), 16 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  nccl->broadcast(std::as_writable_bytes(std::span<float>(dev, 16)), size - 1);
  ASSERT_EQ(cudaMemcpy(mine.data(), dev, 16 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(mine[15], static_cast<float>(size - 1));
  // Variable-length all-gather: rank r sends r + 1 bytes.
  std::vector<std::byte> bytes(static_cast<std::size_t>(world->rank()) + 1, std::byte{7});
  ASSERT_EQ(cudaMemcpy(dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  auto gathered = nccl->all_gather(std::span<const std::byte>(reinterpret_cast<const std::byte*>(dev), bytes.size()));
  for (int r = 0; r < size; ++r) EXPECT_EQ(gathered[r].size(), static_cast<std::size_t>(r) + 1);
  nccl->barrier();
  cudaFree(dev);
#endif
}
