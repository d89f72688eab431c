// The host block cache: reuse by size, the bound on what it keeps, libtorch's
// tensors through it, and frees from other threads.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "inner/host_block_cache.h"
#include "inner/inner_loop.h"
#include "fixtures.h"

using namespace diloco::inner;
using namespace diloco::inner::testing;

TEST(HostBlockCacheTest, AFreedBlockServesTheNextRequestOfItsSize) {
  HostBlockCache cache;
  void* first = nullptr;
  {
    auto a = cache.allocate(1000);
    first = a.get();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(cache.stats().in_use_bytes, 1000u);
  }
  EXPECT_EQ(cache.stats().in_use_bytes, 0u);
  EXPECT_EQ(cache.stats().kept_bytes, 1000u);
  auto b = cache.allocate(1000);
  EXPECT_EQ(b.get(), first);
  auto c = cache.allocate(1000);  // nothing kept of that size now
  EXPECT_NE(c.get(), first);
  const auto s = cache.stats();
  EXPECT_EQ(s.reused, 1u);
  EXPECT_EQ(s.allocated, 2u);
  EXPECT_EQ(s.kept_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 2000u);
}

TEST(HostBlockCacheTest, TheNewestFreedBlockOfASizeComesBackFirst) {
  HostBlockCache cache;
  auto a = cache.allocate(512);
  auto b = cache.allocate(512);
  void* newest = b.get();
  a.clear();
  b.clear();
  EXPECT_EQ(cache.allocate(512).get(), newest);
}

TEST(HostBlockCacheTest, KeepsNoMoreThanThePeakInUse) {
  HostBlockCache cache;
  void* second = nullptr;
  {
    auto a = cache.allocate(1 << 20);
    auto b = cache.allocate(1 << 20);
    second = b.get();
  }  // peak 2 MiB in use, both kept (a freed after b)
  EXPECT_EQ(cache.stats().kept_bytes, std::size_t{2} << 20);
  {
    auto c = cache.allocate(512 << 10);  // a new size: from the system, nothing given back
    EXPECT_EQ(cache.stats().allocated, 3u);
    EXPECT_EQ(cache.stats().released, 0u);
    EXPECT_EQ(cache.stats().kept_bytes, std::size_t{2} << 20);
  }
  // Keeping c too would keep 2.5 MiB for a peak of 2 MiB in use: the block
  // kept longest (b, freed first) goes back.
  auto s = cache.stats();
  EXPECT_EQ(s.peak_in_use_bytes, std::size_t{2} << 20);
  EXPECT_EQ(s.released, 1u);
  EXPECT_EQ(s.kept_bytes, std::size_t{3} << 19);
  auto e = cache.allocate(1 << 20);
  EXPECT_NE(e.get(), second);
  EXPECT_EQ(cache.stats().reused, 1u);
  auto f = cache.allocate(1 << 20);  // the other 1 MiB block went back
  EXPECT_EQ(cache.stats().reused, 1u);
  EXPECT_EQ(cache.stats().allocated, 4u);
}

TEST(HostBlockCacheTest, ZeroBytesTakeNoBlock) {
  HostBlockCache cache;
  { auto a = cache.allocate(0); EXPECT_EQ(a.get(), nullptr); }
  EXPECT_EQ(cache.stats().allocated, 0u);
  EXPECT_EQ(cache.stats().kept_bytes, 0u);
}

TEST(HostBlockCacheTest, BlocksFreedOnOtherThreadsAreKept) {
  HostBlockCache cache;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 200; ++i) {
        auto a = cache.allocate(64 * (1 + (i + t) % 5));
        auto b = cache.allocate(4096);
      }
    });
  for (auto& t : threads) t.join();
  const auto s = cache.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.reused + s.allocated, 4u * 200u * 2u);
  EXPECT_LE(s.kept_bytes, s.peak_in_use_bytes);
}

// Once installed, libtorch's tensors take their memory from the process's
// cache, and an inner step's second run of the same shapes reuses the first's.
TEST(HostBlockCacheTest, InnerStepsReuseTheirBlocks) {
  prepare_host_compute(1);
  const auto before = host_block_cache().stats();
  auto t = torch::empty({1024});
  EXPECT_EQ(host_block_cache().stats().allocated + host_block_cache().stats().reused,
            before.allocated + before.reused + 1);
  t = torch::Tensor();
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  data.batch_size = 4;
  InnerLoop loop(tiny(), fast(), data, corpus, {}, group, 3, 60);
  loop.run(2);
  const auto warm = host_block_cache().stats();
  loop.run(2);
  const auto after = host_block_cache().stats();
  EXPECT_EQ(after.allocated, warm.allocated) << "steps of the same shapes should need no new blocks";
  EXPECT_GT(after.reused, warm.reused);
  EXPECT_LE(after.kept_bytes, after.peak_in_use_bytes);
}

TEST(HostBlockCacheTest, TheEnvironmentTurnsItOff) {
  unsetenv("DILOCO_HOST_BLOCK_CACHE");
  EXPECT_TRUE(host_block_cache_wanted());
  setenv("DILOCO_HOST_BLOCK_CACHE", "1", 1);
  EXPECT_TRUE(host_block_cache_wanted());
  setenv("DILOCO_HOST_BLOCK_CACHE", "0", 1);
  EXPECT_FALSE(host_block_cache_wanted());
  setenv("DILOCO_HOST_BLOCK_CACHE", "off", 1);
  try {
    host_block_cache_wanted();
    ADD_FAILURE() << "a value other than 0 or 1 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("DILOCO_HOST_BLOCK_CACHE is \"off\""), std::string::npos) << e.what();
  }
  unsetenv("DILOCO_HOST_BLOCK_CACHE");
}
