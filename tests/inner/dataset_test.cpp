// The dataset seam: the held-out split, bytes from folders, deterministic and
// disjoint sampling, and the id check every batch goes through.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "inner/data/dataset.h"
#include "temp_dir.h"
#include "inner/data/held_out_split.h"
#include "inner/data/memory_tokens.h"

using namespace diloco::inner;
using diloco::inner::testing::TempDir;

namespace {

std::string text(std::size_t n) {
  std::string out(n, ' ');
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return out;
}

std::vector<std::int64_t> all_of(const TokenSource& s) {
  std::vector<std::int64_t> out(s.size());
  s.read(0, out.size(), out.data());
  return out;
}

// The split as plain loops: every stride-th chunk of 4096 held out (the last
// chunk when there are fewer chunks than the stride). Committed losses of
// byte runs depend on exactly this split.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> reference_split(const std::string& bytes,
                                                                                 std::size_t stride) {
  std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> out;
  const std::size_t chunks = (bytes.size() + 4095) / 4096;
  for (std::size_t i = 0; i < chunks; ++i) {
    const bool held = chunks < stride ? i + 1 == chunks && chunks > 1 : i % stride == stride - 1;
    auto& dst = held ? out.second : out.first;
    for (std::size_t j = i * 4096; j < std::min(bytes.size(), (i + 1) * 4096); ++j)
      dst.push_back(static_cast<unsigned char>(bytes[j]));
  }
  return out;
}

}  // namespace

TEST(HeldOutSplitTest, MatchesTheChunkRuleForEverySizeShape) {
  // Sizes: a multiple of the stride in chunks (last chunk held out), a
  // partial last chunk, and fewer chunks than the stride.
  for (const std::size_t n : {400000u, 20u * 4096u, 20u * 4096u + 17u, 3u * 4096u + 5u, 4096u * 39u + 1u}) {
    const std::string bytes = text(n);
    const Dataset d = bytes_dataset("t", bytes, 0.05);
    const auto [train, eval] = reference_split(bytes, 20);
    EXPECT_EQ(all_of(d.train()), train) << n;
    EXPECT_EQ(all_of(d.eval()), eval) << n;
  }
}

TEST(HeldOutSplitTest, HeldOutPartIsAboutTheRequestedFraction) {
  const Dataset d = bytes_dataset("t", text(400000), 0.05);
  EXPECT_EQ(d.train().size() + d.eval().size(), 400000u);
  EXPECT_NEAR(static_cast<double>(d.eval().size()) / 400000.0, 0.05, 0.01);
}

TEST(DatasetTest, TooSmallDataIsRefused) {
  TempDir dir;
  std::ofstream(dir.path / "a.txt") << text(100);
  DataConfig c;
  c.paths = {(dir.path / "a.txt").string()};
  EXPECT_THROW(open_dataset(c, 256, 66), DataError);
}

TEST(DatasetTest, FolderOfBytesSkipsBinaryFilesAndLinks) {
  TempDir dir;
  const auto t = text(20000);
  std::ofstream(dir.path / "a.txt", std::ios::binary) << t;
  std::ofstream(dir.path / "b.dat", std::ios::binary) << std::string("\0\0\1binary", 9);
  std::filesystem::create_symlink(dir.path / "a.txt", dir.path / "a.u8");
  DataConfig c;
  c.paths = {dir.path.string()};
  c.eval_fraction = 0.1;
  const Dataset d = open_dataset(c, 256, 64);
  EXPECT_EQ(d.files(), 1u);
  EXPECT_EQ(d.train().size() + d.eval().size(), t.size());
  c.paths = {(dir.path / "missing").string()};
  EXPECT_THROW(open_dataset(c, 256, 64), DataError);
}

// diloco eval's stream: every file whole, nothing held out, the bytes read counted.
TEST(DatasetTest, TokenStreamIsEveryFileWholeAndCountsItsBytes) {
  TempDir dir;
  std::ofstream(dir.path / "a.txt") << text(3000);
  std::ofstream(dir.path / "b.txt") << text(500);
  DataConfig c;
  std::uint64_t bytes = 0;
  const auto s = open_token_stream(c, {dir.path.string()}, 256, &bytes);
  EXPECT_EQ(s->size(), 3500u);
  EXPECT_EQ(bytes, 3500u);
  std::vector<std::int64_t> first(3);
  s->read(0, 3, first.data());
  const auto t = text(3000);
  EXPECT_EQ(first, (std::vector<std::int64_t>{t[0], t[1], t[2]}));
  c.format = DataFormat::kText;
  EXPECT_THROW(open_token_stream(c, {dir.path.string()}, 256), DataError);  // no tokenizer
}

TEST(DatasetTest, EvalPathsAreTheHeldOutDataAndNothingIsSplitOff) {
  TempDir dir;
  std::ofstream(dir.path / "train.txt") << text(50000);
  std::ofstream(dir.path / "eval.txt") << text(3000);
  DataConfig c;
  c.paths = {(dir.path / "train.txt").string()};
  c.eval_paths = {(dir.path / "eval.txt").string()};
  const Dataset d = open_dataset(c, 256, 64);
  EXPECT_EQ(d.train().size(), 50000u);
  EXPECT_EQ(d.eval().size(), 3000u);
  EXPECT_EQ(d.files(), 2u);
}

TEST(BatchSamplerTest, BatchesAreAFunctionOfSeedShardReplicaAndStep) {
  const Dataset d = bytes_dataset("t", text(200000), 0.05);
  DataConfig cfg;
  cfg.batch_size = 4;
  BatchSampler a(d, cfg, {0, 2, 0, 2}, 16, 256, 9);
  BatchSampler same(d, cfg, {0, 2, 0, 2}, 16, 256, 9);
  BatchSampler other_replica(d, cfg, {0, 2, 1, 2}, 16, 256, 9);
  BatchSampler other_seed(d, cfg, {0, 2, 0, 2}, 16, 256, 10);
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
  const Dataset d = bytes_dataset("t", text(300000), 0.05);
  DataConfig cfg;
  cfg.sharding = Sharding::kContiguous;
  BatchSampler s0(d, cfg, {0, 3, 0, 1}, 16, 256, 1);
  BatchSampler s1(d, cfg, {1, 3, 0, 1}, 16, 256, 1);
  BatchSampler s2(d, cfg, {2, 3, 0, 1}, 16, 256, 1);
  EXPECT_EQ(s0.shard_begin(), 0u);
  EXPECT_EQ(s0.shard_end(), s1.shard_begin());
  EXPECT_EQ(s1.shard_end(), s2.shard_begin());
  EXPECT_EQ(s2.shard_end(), d.train().size());
  cfg.sharding = Sharding::kIid;
  BatchSampler iid(d, cfg, {2, 3, 0, 1}, 16, 256, 1);
  EXPECT_EQ(iid.shard_begin(), 0u);
  EXPECT_EQ(iid.shard_end(), d.train().size());
}

TEST(BatchSamplerTest, EvalWindowsAreSplitAcrossReplicasWithoutOverlap) {
  const Dataset d = bytes_dataset("t", text(200000), 0.05);
  DataConfig cfg;
  BatchSampler solo(d, cfg, {0, 1, 0, 1}, 16, 256, 1);
  BatchSampler r0(d, cfg, {0, 1, 0, 2}, 16, 256, 1);
  BatchSampler r1(d, cfg, {0, 1, 1, 2}, 16, 256, 1);
  auto all = solo.eval_windows(9);
  auto a = r0.eval_windows(9);
  auto b = r1.eval_windows(9);
  EXPECT_EQ(all.size(), 9u * 17u);
  EXPECT_EQ(a.size(), 5u * 17u);
  EXPECT_EQ(b.size(), 4u * 17u);
  // Window 1 of the whole set is replica 1's first window.
  EXPECT_TRUE(std::equal(b.begin(), b.begin() + 17, all.begin() + 17));
}

TEST(BatchSamplerTest, AnIdOutsideTheVocabularyNamesItsFileAndOffset) {
  // Letters only: a vocabulary of 'a' + 10 leaves most of them out.
  const Dataset d = bytes_dataset("letters.txt", text(200000), 0.05);
  DataConfig cfg;
  BatchSampler s(d, cfg, {0, 1, 0, 1}, 16, 'a' + 10, 1);
  std::vector<std::int64_t> batch;
  try {
    s.train_batch(0, batch);
    FAIL() << "an id above the vocabulary went through";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("letters.txt at byte offset "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not below model.vocab = 107"), std::string::npos) << e.what();
  }
}
