// chunk-topk (SparseLoCo's codec): the k largest of every chunk, each value
// within half a level of the chunk's grid, the payload's size, cutting at
// chunk boundaries, unbiased stochastic rounding, and crafted bodies refused
// before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "diloco/compression/codec.h"
#include "codec_test_util.h"
#include "diloco/compression/crc32c.h"

namespace dc = diloco::compression;
using dc::testing::normal;
using dc::testing::reseal;

namespace {

std::unique_ptr<dc::Codec> chunk_topk(std::uint32_t chunk, double ratio, unsigned bits, bool stochastic = false) {
  dc::CodecConfig c;
  c.name = "chunk-topk";
  c.block = chunk;
  c.topk_ratio = ratio;
  c.value_bits = bits;
  c.stochastic_rounding = stochastic;
  std::string error;
  auto out = dc::make_codec(c, &error);
  EXPECT_NE(out, nullptr) << error;
  return out;
}


std::size_t keep(double ratio, std::size_t len) {
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(ratio * static_cast<double>(len))), 1, len);
}

std::vector<float> round_trip(const dc::Codec& c, const std::vector<float>& v, std::uint64_t seed = 0) {
  std::vector<std::byte> payload;
  EXPECT_EQ(c.encode(v, payload, seed), dc::EncodeError::kOk);
  std::vector<float> out(v.size(), -7.0f);
  EXPECT_EQ(c.decode(payload, out), dc::DecodeError::kOk);
  return out;
}


}  // namespace

TEST(ChunkTopkTest, KeepsTheKLargestOfEveryChunkWithinHalfALevel) {
  for (const unsigned bits : {2u, 4u, 8u})
    for (const std::uint32_t chunk : {1u, 16u, 64u, 4096u})
      for (const std::size_t n : {1ul, 15ul, 64ul, 1000ul, 20000ul}) {
        // Scales that change from chunk to chunk, and a run of ties.
        auto v = normal(n, static_cast<std::uint32_t>(n + chunk + bits));
        for (std::size_t i = 0; i < n; ++i) v[i] *= static_cast<float>(1 + (i / 700) % 5);
        for (std::size_t i = n / 3; i < std::min(n, n / 3 + 40); ++i) v[i] = i % 2 ? 2.5f : -2.5f;
        const double ratio = 1.0 / 64;
        auto d = round_trip(*chunk_topk(chunk, ratio, bits), v);
        const double levels = (1u << (bits - 1)) - 1;
        for (std::size_t first = 0; first < n; first += chunk) {
          const std::size_t len = std::min<std::size_t>(chunk, n - first);
          std::vector<std::size_t> order(len);
          std::iota(order.begin(), order.end(), first);
          std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::abs(v[a]) > std::abs(v[b]); });
          const std::size_t k = keep(ratio, len);
          const float hi = std::abs(v[order[0]]);
          const float lo = std::abs(v[order[k - 1]]);
          std::vector<bool> kept(len, false);
          for (std::size_t i = 0; i < k; ++i) kept[order[i] - first] = true;
          for (std::size_t i = 0; i < len; ++i) {
            const std::size_t at = first + i;
            if (!kept[i]) {
              ASSERT_EQ(d[at], 0.0f) << "bits=" << bits << " chunk=" << chunk << " n=" << n << " i=" << at;
              continue;
            }
            ASSERT_EQ(std::signbit(d[at]), std::signbit(v[at])) << "i=" << at;
            const double half_level = (hi - lo) / levels / 2;
            ASSERT_LE(std::abs(std::abs(d[at]) - std::abs(v[at])), half_level * (1 + 1e-6) + 1e-7 * hi)
                << "bits=" << bits << " chunk=" << chunk << " n=" << n << " i=" << at;
          }
        }
      }
}

TEST(ChunkTopkTest, PayloadHoldsScalesAndPackedIndexAndValueBits) {
  const std::size_t n = 1 << 16;
  auto v = normal(n, 3);
  std::vector<std::byte> payload;
  ASSERT_EQ(chunk_topk(4096, 1.0 / 64, 2)->encode(v, payload), dc::EncodeError::kOk);
  // 16 chunks x 64 kept x (12 index bits + 2 value bits), 8 scale bytes per chunk, an 8-byte prefix.
  EXPECT_EQ(payload.size(), dc::kWireHeaderSize + 8 + 16 * 8 + 16 * 64 * 14 / 8);
  // Against fp32: 14 bits per kept entry and 8 bytes of scales per chunk, 134x fewer bytes.
  EXPECT_GT(static_cast<double>(n * 4) / static_cast<double>(payload.size()), 133.0);
  EXPECT_EQ(chunk_topk(4096, 1.0 / 64, 2)->split_granule(), 4096u);
}

TEST(ChunkTopkTest, CuttingAtChunkBoundariesGivesTheSameValues) {
  const std::size_t n = 10000;
  auto v = normal(n, 5);
  auto c = chunk_topk(256, 0.05, 4);
  auto whole = round_trip(*c, v);
  std::vector<float> parts;
  for (std::size_t first = 0; first < n; first += 2560) {
    std::vector<float> part(v.begin() + static_cast<std::ptrdiff_t>(first),
                            v.begin() + static_cast<std::ptrdiff_t>(std::min(n, first + 2560)));
    auto d = round_trip(*c, part);
    parts.insert(parts.end(), d.begin(), d.end());
  }
  EXPECT_EQ(parts, whole);
}

TEST(ChunkTopkTest, StochasticRoundingIsUnbiasedAndSeeded) {
  // One chunk: magnitudes 1 (smallest kept) to 2 (largest), 2 bits, so a
  // kept 1.3 decodes to 1 or 2, 1.3 on average.
  std::vector<float> v(64, 0.0f);
  v[3] = 2.0f;
  v[10] = -1.3f;
  v[20] = 1.0f;
  auto c = chunk_topk(64, 3.0 / 64, 2, true);
  double sum = 0.0;
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) sum += round_trip(*c, v, static_cast<std::uint64_t>(t))[10];
  EXPECT_NEAR(sum / trials, -1.3, 0.03);
  EXPECT_EQ(round_trip(*chunk_topk(64, 3.0 / 64, 2), v)[10], -1.0f);  // nearest: always 1
  std::vector<std::byte> a, b;
  c->encode(v, a, 5);
  c->encode(v, b, 5);
  EXPECT_EQ(a, b);
}

TEST(ChunkTopkTest, SettingsOutOfRangeAreRefused) {
  dc::CodecConfig c;
  c.name = "chunk-topk";
  std::string error;
  c.value_bits = 3;
  EXPECT_EQ(dc::make_codec(c, &error), nullptr);
  EXPECT_NE(error.find("bits"), std::string::npos) << error;
  c.value_bits = 2;
  c.block = 65537;
  EXPECT_EQ(dc::make_codec(c, &error), nullptr);
  EXPECT_NE(error.find("65536"), std::string::npos) << error;
}

TEST(ChunkTopkTest, CraftedBodiesAreRefusedBeforeAnythingIsWritten) {
  const std::size_t n = 300;
  auto v = normal(n, 17);
  auto c = chunk_topk(128, 0.05, 2);  // chunks of 128, 128, 44: 7, 7 and 3 kept; 7 index bits
  std::vector<std::byte> good;
  ASSERT_EQ(c->encode(v, good), dc::EncodeError::kOk);
  const std::size_t scales = dc::kWireHeaderSize + 8;
  const std::size_t stream = scales + 3 * 8;
  std::vector<float> out(n, 42.0f);
  auto expect = [&](std::vector<std::byte> p, dc::DecodeError want, const char* what) {
    reseal(p);
    EXPECT_EQ(c->decode(p, out), want) << what;
    EXPECT_EQ(c->decode_accumulate(p, out, 0.5f), want) << what;
  };
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -1.0f}) {
    auto p = good;
    std::memcpy(p.data() + scales + 4, &bad, 4);
    expect(p, dc::DecodeError::kNonFiniteScale, "bad largest magnitude");
  }
  {
    auto p = good;  // smallest above largest
    const float big = 1e9f;
    std::memcpy(p.data() + scales, &big, 4);
    expect(p, dc::DecodeError::kCorruptBody, "smallest above largest");
  }
  {
    auto p = good;  // the first entry's index becomes 127, so the second is out of order
    p[stream] = static_cast<std::byte>((static_cast<unsigned>(p[stream]) & 0x80u) | 0x7Fu);
    expect(p, dc::DecodeError::kCorruptBody, "indices out of order");
  }
  {
    // The last chunk holds 44 entries: its first index set to 100.
    auto p = good;
    const std::size_t bit = (7 + 7) * (7 + 2);
    std::uint32_t word;
    std::memcpy(&word, p.data() + stream + bit / 8, 4);
    word = (word & ~(0x7Fu << (bit % 8))) | (100u << (bit % 8));
    std::memcpy(p.data() + stream + bit / 8, &word, 4);
    expect(p, dc::DecodeError::kCorruptBody, "index past the last chunk");
  }
  {
    auto p = good;
    p[dc::kWireHeaderSize] = std::byte{4};  // written with 4 bits
    expect(p, dc::DecodeError::kCodecMismatch, "other bits");
  }
  {
    auto p = good;
    p[dc::kWireHeaderSize + 2] = std::byte{1};
    expect(p, dc::DecodeError::kCorruptBody, "reserved byte");
  }
  for (float x : out) ASSERT_EQ(x, 42.0f) << "output written by a refused decode";
  // A receiver set to other bits or another ratio refuses the payload.
  EXPECT_NE(chunk_topk(128, 0.05, 4)->decode(good, out), dc::DecodeError::kOk);
  EXPECT_NE(chunk_topk(128, 0.1, 2)->decode(good, out), dc::DecodeError::kOk);
}
