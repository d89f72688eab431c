// Token shards: llm.c's two header kinds and headerless files read back id
// for id, and every malformed file refused with its name (and offset).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "inner/data/dataset.h"
#include "temp_dir.h"
#include "inner/data/token_shards.h"

using namespace diloco::inner;
using diloco::inner::testing::TempDir;

namespace {

std::vector<std::uint32_t> ramp(std::size_t n, std::uint32_t modulo, std::uint32_t offset = 0) {
  std::vector<std::uint32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::uint32_t>((i * 2654435761u + offset) % modulo);
  return ids;
}

std::vector<std::int64_t> read_all(const TokenSource& s) {
  std::vector<std::int64_t> out(s.size());
  s.read(0, out.size(), out.data());
  return out;
}

template <class T>
void write_raw(const std::string& path, const std::vector<T>& values, std::size_t extra_bytes = 0) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  for (std::size_t i = 0; i < extra_bytes; ++i) out.put('\0');
}

std::vector<std::int32_t> header(std::int32_t magic, std::int32_t version, std::int32_t count) {
  std::vector<std::int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  return h;
}

// The message of the DataError that opening `paths` throws.
std::string open_error(const std::vector<std::string>& paths, TokenDtype dtype = TokenDtype::kAuto) {
  try {
    open_token_shards(paths, dtype);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(TokenShardsTest, LlmcShardsOfBothWidthsReadBackInOrderAcrossFiles) {
  TempDir dir;
  const auto small = ramp(5000, 4096);
  const auto large = ramp(3000, 128256, 7);  // Llama-3's vocabulary: uint32
  write_token_shard(dir.file("a_000.bin"), small);
  write_token_shard(dir.file("a_001.bin"), large);
  EXPECT_EQ(std::filesystem::file_size(dir.file("a_000.bin")), 1024u + 2u * 5000u);
  EXPECT_EQ(std::filesystem::file_size(dir.file("a_001.bin")), 1024u + 4u * 3000u);
  std::ofstream(dir.file("tokenizer.model")) << "not a shard";  // a folder lists *.bin only
  const ShardSet set = open_token_shards({dir.path.string()}, TokenDtype::kAuto);
  EXPECT_EQ(set.files, 2u);
  ASSERT_EQ(set.tokens->size(), 8000u);
  std::vector<std::int64_t> expected(small.begin(), small.end());
  expected.insert(expected.end(), large.begin(), large.end());
  EXPECT_EQ(read_all(*set.tokens), expected);
  // A read across the file boundary, and where ids sit on disk.
  std::vector<std::int64_t> window(10);
  set.tokens->read(4995, 10, window.data());
  EXPECT_TRUE(std::equal(window.begin(), window.end(), expected.begin() + 4995));
  EXPECT_EQ(set.tokens->where(4999), dir.file("a_000.bin") + " at byte offset " + std::to_string(1024 + 2 * 4999));
  EXPECT_EQ(set.tokens->where(5001), dir.file("a_001.bin") + " at byte offset " + std::to_string(1024 + 4));
}

TEST(TokenShardsTest, HeadlessFilesOfEitherWidth) {
  TempDir dir;
  std::vector<std::uint16_t> u16 = {1, 2, 65535, 4};
  std::vector<std::uint32_t> u32 = {70000, 1, 2};
  write_raw(dir.file("x.bin"), u16);
  write_raw(dir.file("y.bin"), u32);
  EXPECT_EQ(read_all(*open_token_shards({dir.file("x.bin")}, TokenDtype::kUint16).tokens),
            (std::vector<std::int64_t>{1, 2, 65535, 4}));
  EXPECT_EQ(read_all(*open_token_shards({dir.file("y.bin")}, TokenDtype::kUint32).tokens),
            (std::vector<std::int64_t>{70000, 1, 2}));
}

TEST(TokenShardsTest, MalformedShardsAreRefusedNamingTheFile) {
  TempDir dir;
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(open_error({dir.file("missing.bin")}), "data path " + dir.file("missing.bin") + " does not exist"));

  std::ofstream(dir.file("empty.bin")).close();
  EXPECT_TRUE(has(open_error({dir.file("empty.bin")}), "token shard " + dir.file("empty.bin") + " is empty"));

  write_raw(dir.file("magic.bin"), header(12345, 1, 4), 8);
  const auto magic = open_error({dir.file("magic.bin")});
  EXPECT_TRUE(has(magic, dir.file("magic.bin") + " has no llm.c header (magic 12345 at byte offset 0")) << magic;

  write_raw(dir.file("version.bin"), header(kShardMagicU16, 7, 4), 8);
  const auto version = open_error({dir.file("version.bin")});
  EXPECT_TRUE(has(version, dir.file("version.bin") + " has version 7 at byte offset 4")) << version;

  write_raw(dir.file("count.bin"), header(kShardMagicU16, 1, 1000), 2 * 10);
  const auto count = open_error({dir.file("count.bin")});
  EXPECT_TRUE(has(count, dir.file("count.bin") + ": its header (byte offset 8) says 1000 tokens")) << count;

  write_raw(dir.file("none.bin"), header(kShardMagicU16, 1, 0));
  EXPECT_TRUE(has(open_error({dir.file("none.bin")}), "holds no tokens"));

  write_raw(dir.file("odd.bin"), std::vector<std::uint8_t>{1, 2, 3});
  const auto odd = open_error({dir.file("odd.bin")}, TokenDtype::kUint16);
  EXPECT_TRUE(has(odd, dir.file("odd.bin") + " is 3 bytes, not a multiple of 2")) << odd;

  write_token_shard(dir.file("llmc.bin"), ramp(100, 50));
  EXPECT_TRUE(has(open_error({dir.file("llmc.bin")}, TokenDtype::kUint16), "starts with an llm.c header"));

  std::filesystem::create_directories(dir.path / "no_shards");
  EXPECT_TRUE(has(open_error({(dir.path / "no_shards").string()}), "holds no token shards (*.bin)"));
}

TEST(TokenShardsTest, DatasetChecksIdsAgainstTheVocabularyNamingFileAndOffset) {
  TempDir dir;
  auto ids = ramp(200000, 4000);
  ids[123457] = 4096;  // one id at the vocabulary: 4096 does not fit model.vocab = 4096
  write_token_shard(dir.file("bad.bin"), ids);
  DataConfig c;
  c.format = DataFormat::kTokens;
  c.paths = {dir.file("bad.bin")};
  try {
    open_dataset(c, 4096, 64);
    FAIL() << "an id at model.vocab was accepted";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "token id 4096 in " + dir.file("bad.bin") + " at byte offset " +
                                         std::to_string(1024 + 2 * 123457) + " is not below model.vocab = 4096");
  }
  EXPECT_NO_THROW(open_dataset(c, 4097, 64));
}

TEST(TokenShardsTest, StartUpReadsASampleNotTheWholeShard) {
  // A bad id the start-up sample does not cover is still caught: by the full
  // scan `diloco check` runs, and by the batch that would carry it.
  TempDir dir;
  const std::size_t n = 4u << 20;
  auto ids = ramp(n, 1000);
  // The sample reads 64 blocks of 4096 ids spread evenly; this one lies
  // between the 21st and the 22nd.
  const std::size_t bad = (n - 4096) * 20 / 63 + 10000;
  ids[bad] = 5000;
  write_token_shard(dir.file("big.bin"), ids);
  write_token_shard(dir.file("held_out.bin"), ramp(10000, 1000));
  DataConfig c;
  c.format = DataFormat::kTokens;
  c.paths = {dir.file("big.bin")};
  c.eval_paths = {dir.file("held_out.bin")};
  EXPECT_NO_THROW(open_dataset(c, 1000, 64));
  EXPECT_THROW(open_dataset(c, 1000, 64, /*full_scan=*/true), DataError);
}
