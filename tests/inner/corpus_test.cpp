// Corpus loading, held-out split and deterministic, disjoint sampling.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "inner/corpus.h"

using namespace diloco::inner;

namespace {

std::vector<std::uint8_t> text(std::size_t n) {
  std::vector<std::uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>('a' + (i * 7 + i / 13) % 26);
  return out;
}

}  // namespace

TEST(CorpusTest, HeldOutPartIsAboutTheRequestedFractionAndDisjoint) {
  auto c = Corpus::from_bytes(text(400000), 0.05, 100);
  EXPECT_EQ(c.train().size() + c.eval().size(), 400000u);
  EXPECT_NEAR(static_cast<double>(c.eval().size()) / 400000.0, 0.05, 0.01);
}

TEST(CorpusTest, TooSmallCorpusIsRefused) {
  EXPECT_THROW(Corpus::from_bytes(text(100), 0.05, 64), DataError);
}

TEST(CorpusTest, FolderLoadSkipsBinaryFilesAndLinks) {
  const auto dir = std::filesystem::temp_directory_path() / ("diloco_corpus_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto t = text(20000);
  std::ofstream(dir / "a.txt", std::ios::binary).write(reinterpret_cast<const char*>(t.data()), t.size());
  std::ofstream(dir / "b.dat", std::ios::binary) << std::string("\0\0\1binary", 9);
  std::filesystem::create_symlink(dir / "a.txt", dir / "a.u8");
  auto c = Corpus::load({dir.string()}, 0.1, 64);
  EXPECT_EQ(c.files(), 1u);
  EXPECT_EQ(c.train().size() + c.eval().size(), t.size());
  EXPECT_THROW(Corpus::load({(dir / "missing").string()}, 0.1, 64), DataError);
  std::filesystem::remove_all(dir);
}

TEST(BatchSamplerTest, BatchesAreAFunctionOfSeedShardReplicaAndStep) {
  auto c = Corpus::from_bytes(text(200000), 0.05, 100);
  DataConfig cfg;
  cfg.batch_size = 4;
  BatchSampler a(c, cfg, {0, 2, 0, 2}, 16, 9);
  BatchSampler same(c, cfg, {0, 2, 0, 2}, 16, 9);
  BatchSampler other_replica(c, cfg, {0, 2, 1, 2}, 16, 9);
  BatchSampler other_seed(c, cfg, {0, 2, 0, 2}, 16, 10);
  std::vector<std::int64_t> x, y, z, w;
  a.train_batch(5, x);
  same.train_batch(5, y);
  other_replica.train_batch(5, z);
  other_seed.train_batch(5, w);
  EXPECT_EQ(x.size(), 4u * 17u);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  EXPECT_NE(x, w);
  a.train_batch(6, y);
  EXPECT_NE(x, y);
}

TEST(BatchSamplerTest, ContiguousShardsAreDisjointSlices) {
  auto c = Corpus::from_bytes(text(300000), 0.05, 100);
  DataConfig cfg;
  cfg.sharding = Sharding::kContiguous;
  BatchSampler s0(c, cfg, {0, 3, 0, 1}, 16, 1);
  BatchSampler s1(c, cfg, {1, 3, 0, 1}, 16, 1);
  BatchSampler s2(c, cfg, {2, 3, 0, 1}, 16, 1);
  EXPECT_EQ(s0.shard_begin(), 0u);
  EXPECT_EQ(s0.shard_end(), s1.shard_begin());
  EXPECT_EQ(s1.shard_end(), s2.shard_begin());
  EXPECT_EQ(s2.shard_end(), c.train().size());
  cfg.sharding = Sharding::kIid;
  BatchSampler iid(c, cfg, {2, 3, 0, 1}, 16, 1);
  EXPECT_EQ(iid.shard_begin(), 0u);
  EXPECT_EQ(iid.shard_end(), c.train().size());
}

TEST(BatchSamplerTest, EvalWindowsAreSplitAcrossReplicasWithoutOverlap) {
  auto c = Corpus::from_bytes(text(200000), 0.05, 100);
  DataConfig cfg;
  BatchSampler solo(c, cfg, {0, 1, 0, 1}, 16, 1);
  BatchSampler r0(c, cfg, {0, 1, 0, 2}, 16, 1);
  BatchSampler r1(c, cfg, {0, 1, 1, 2}, 16, 1);
  auto all = solo.eval_windows(9);
  auto a = r0.eval_windows(9);
  auto b = r1.eval_windows(9);
  EXPECT_EQ(all.size(), 9u * 17u);
  EXPECT_EQ(a.size(), 5u * 17u);
  EXPECT_EQ(b.size(), 4u * 17u);
  // Window 1 of the whole set is replica 1's first window.
  EXPECT_TRUE(std::equal(b.begin(), b.begin() + 17, all.begin() + 17));
}
