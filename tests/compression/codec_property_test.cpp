// Property tests of every codec on random and adversarial inputs: error
// bounds, exact top-k selection, unbiased stochastic rounding, refusals of
// non-finite input and of crafted bodies, and error feedback over rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "diloco/compression/codec.h"
#include "codec_test_util.h"
#include "diloco/compression/crc32c.h"
#include "diloco/compression/error_feedback.h"

namespace dc = diloco::compression;
using dc::testing::normal;
using dc::testing::reseal;

namespace {

constexpr std::uint32_t kBlock = 64;

std::unique_ptr<dc::Codec> codec(const std::string& name, bool stochastic = false, double ratio = 0.1) {
  dc::CodecConfig c;
  c.name = name;
  c.block = kBlock;
  c.stochastic_rounding = stochastic;
  c.topk_ratio = ratio;
  auto out = dc::make_codec(c);
  EXPECT_NE(out, nullptr) << name;
  return out;
}


// Inputs the codecs must survive: random, zeros, denormals, huge, mixed scales.
std::vector<std::pair<std::string, std::vector<float>>> inputs(std::size_t n) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  out.emplace_back("normal", normal(n, static_cast<std::uint32_t>(n) + 1));
  out.emplace_back("zeros", std::vector<float>(n, 0.0f));
  std::vector<float> denormal(n);
  for (std::size_t i = 0; i < n; ++i) denormal[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 50) * (i % 2 ? 1.f : -1.f);
  out.emplace_back("denormal", denormal);
  out.emplace_back("huge", normal(n, 7, 1e30f));
  auto mixed = normal(n, 9, 1e-3f);
  for (std::size_t i = 0; i < n; i += 17) mixed[i] = 1e4f;
  out.emplace_back("mixed", mixed);
  return out;
}

std::vector<float> round_trip(const dc::Codec& c, const std::vector<float>& v, std::uint64_t seed = 0) {
  std::vector<std::byte> payload;
  EXPECT_EQ(c.encode(v, payload, seed), dc::EncodeError::kOk);
  std::vector<float> out(v.size(), -7.0f);
  EXPECT_EQ(c.decode(payload, out), dc::DecodeError::kOk) << c.name();
  return out;
}

float block_absmax(const std::vector<float>& v, std::size_t i) {
  const std::size_t b = i / kBlock * kBlock;
  float m = 0.0f;
  for (std::size_t j = b; j < std::min(v.size(), b + kBlock); ++j) m = std::max(m, std::abs(v[j]));
  return m;
}


const std::vector<std::size_t> kLengths{0, 1, 7, 63, 64, 65, 1000, 4099};

}  // namespace

TEST(CodecPropertyTest, NonFiniteInputIsRefusedByEveryCodec) {
  for (const auto& name : dc::codec_names()) {
    auto c = codec(name);
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
      std::vector<float> v(100, 1.0f);
      v[42] = bad;
      std::vector<std::byte> payload{std::byte{1}};
      EXPECT_EQ(c->encode(v, payload), dc::EncodeError::kNonFiniteInput) << name;
      EXPECT_TRUE(payload.empty()) << name << ": a refused encode left bytes behind";
    }
  }
}

TEST(CodecPropertyTest, Fp16WithinHalfAnUlpAndSaturating) {
  auto c = codec("fp16");
  for (auto n : kLengths)
    for (const auto& [what, v] : inputs(n)) {
      auto d = round_trip(*c, v);
      for (std::size_t i = 0; i < n; ++i) {
        const float x = std::clamp(v[i], -65504.0f, 65504.0f);
        const float bound = std::max(std::abs(x) * std::ldexp(1.0f, -11), std::ldexp(1.0f, -25));
        ASSERT_LE(std::abs(x - d[i]), bound) << what << " n=" << n << " i=" << i << " x=" << v[i];
        ASSERT_TRUE(std::isfinite(d[i]));
      }
    }
}

TEST(CodecPropertyTest, Bf16WithinHalfAnUlp) {
  auto c = codec("bf16");
  for (auto n : kLengths)
    for (const auto& [what, v] : inputs(n)) {
      auto d = round_trip(*c, v);
      for (std::size_t i = 0; i < n; ++i) {
        // Half of bf16's spacing: relative 2^-8, or 2^-134 among subnormals.
        const float bound = std::abs(v[i]) * std::ldexp(1.0f, -8) + std::ldexp(1.0f, -133);
        ASSERT_LE(std::abs(v[i] - d[i]), bound) << what << " n=" << n << " i=" << i;
      }
    }
}

TEST(CodecPropertyTest, Int8AndInt4ErrorWithinBlockAbsmaxOverLevels) {
  for (const auto& [name, levels] : std::vector<std::pair<std::string, float>>{{"int8", 127.f}, {"int4", 7.f}})
    for (bool stochastic : {false, true}) {
      auto c = codec(name, stochastic);
      for (auto n : kLengths)
        for (const auto& [what, v] : inputs(n)) {
          auto d = round_trip(*c, v, 99);
          for (std::size_t i = 0; i < n; ++i) {
            // Plus one fp32 subnormal step, where absmax / levels itself underflows.
            const float bound = std::max(block_absmax(v, i) / levels * (1.0f + 1e-5f),
                                         std::numeric_limits<float>::denorm_min());
            ASSERT_LE(std::abs(v[i] - d[i]), bound)
                << name << (stochastic ? " stochastic " : " ") << what << " n=" << n << " i=" << i;
          }
        }
    }
}

TEST(CodecPropertyTest, Int8CompressesAboutFourTimes) {
  std::vector<float> v = normal(1 << 16, 3);
  std::vector<std::byte> payload;
  codec("int8")->encode(v, payload);
  const double ratio = static_cast<double>(v.size() * 4) / static_cast<double>(payload.size());
  EXPECT_NEAR(ratio, 4.0 * 64 / 68, 0.01);  // one fp32 scale per 64 values
}

TEST(CodecPropertyTest, StochasticRoundingIsUnbiasedAndSeeded) {
  auto c = codec("int8", true);
  // One block whose absmax is 127 so the grid step is 1: value 0.3 rounds to
  // 0 or 1, 0.3 on average.
  std::vector<float> v(kBlock, 0.3f);
  v[0] = 127.0f;
  double mean_err = 0.0;
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    auto d = round_trip(*c, v, static_cast<std::uint64_t>(t));
    for (std::size_t i = 1; i < v.size(); ++i) mean_err += d[i] - v[i];
  }
  mean_err /= trials * (v.size() - 1.0);
  EXPECT_LT(std::abs(mean_err), 0.01);
  // Nearest rounding is biased here: 0.3 always goes to 0.
  auto nearest = round_trip(*codec("int8"), v);
  EXPECT_EQ(nearest[1], 0.0f);
  // Same seed, same bytes.
  std::vector<std::byte> a, b;
  c->encode(v, a, 5);
  c->encode(v, b, 5);
  EXPECT_EQ(a, b);
  c->encode(v, b, 6);
  EXPECT_NE(a, b);
}

TEST(CodecPropertyTest, TopkKeepsExactlyTheKLargest) {
  for (const std::string name : {"topk", "topk+int8"})
    for (auto n : kLengths) {
      if (n == 0) continue;
      auto v = normal(n, static_cast<std::uint32_t>(n) * 3);
      auto c = codec(name, false, 0.1);
      auto d = round_trip(*c, v);
      const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(0.1 * n)));
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](auto a, auto b) {
        return std::abs(v[a]) > std::abs(v[b]) || (std::abs(v[a]) == std::abs(v[b]) && a < b);
      });
      std::vector<bool> kept(n, false);
      for (std::size_t i = 0; i < k; ++i) kept[order[i]] = true;
      float kept_absmax = 0.0f;
      for (std::size_t i = 0; i < k; ++i) kept_absmax = std::max(kept_absmax, std::abs(v[order[i]]));
      for (std::size_t i = 0; i < n; ++i) {
        if (!kept[i]) {
          ASSERT_EQ(d[i], 0.0f) << name << " n=" << n << " i=" << i;
        } else {
          const float bound = name == "topk" ? std::abs(v[i]) * std::ldexp(1.0f, -11) + 1e-7f : kept_absmax / 127.0f;
          ASSERT_LE(std::abs(d[i] - v[i]), bound) << name << " n=" << n << " i=" << i;
        }
      }
    }
}

TEST(CodecPropertyTest, TopkBreaksTiesTowardsTheLowerIndex) {
  // Few distinct magnitudes, so the k-th largest is shared by many entries:
  // the kept ones must be the lowest-indexed of them, as a stable sort says.
  for (const std::size_t n : {10u, 1000u, 65537u, 300000u}) {
    std::vector<float> v(n);
    std::uint32_t x = 12345u + static_cast<std::uint32_t>(n);
    for (auto& f : v) {
      x = x * 1664525u + 1013904223u;
      f = static_cast<float>(1 + (x >> 16) % 3) * ((x >> 8) & 1 ? -1.0f : 1.0f);
    }
    for (const double ratio : {0.01, 0.3, 0.5}) {
      auto c = codec("topk", false, ratio);
      auto d = round_trip(*c, v);
      const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(ratio * n)));
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::abs(v[a]) > std::abs(v[b]); });
      std::vector<bool> kept(n, false);
      for (std::size_t i = 0; i < k; ++i) kept[order[i]] = true;
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(d[i] != 0.0f, kept[i]) << "n=" << n << " ratio=" << ratio << " i=" << i;
    }
  }
}

// Vectors of at least 1 Mi values take the sampled path: the threshold is
// guessed from 16 runs of the vector, then made exact. The kept set must be
// the stable sort's whatever the guess: a good sample, one that misjudges
// (the sampled runs hold the large values, so too few entries pass the
// guess and every entry becomes a candidate), and ties at the threshold.
TEST(CodecPropertyTest, TopkOnLargeVectorsIsExactWhateverTheSampleSays) {
  const std::size_t n = std::size_t{1} << 21;
  auto check = [&](const std::vector<float>& v, double ratio, const char* what) {
    auto c = codec("topk", false, ratio);
    auto d = round_trip(*c, v);
    const std::size_t k = static_cast<std::size_t>(std::ceil(ratio * static_cast<double>(n)));
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::abs(v[a]) > std::abs(v[b]); });
    std::vector<bool> kept(n, false);
    for (std::size_t i = 0; i < k; ++i) kept[order[i]] = true;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += (d[i] != 0.0f) != kept[i] ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << what << " ratio=" << ratio;
  };
  const auto gaussian = normal(n, 77);
  check(gaussian, 0.1, "gaussian");
  check(gaussian, 0.01, "gaussian");
  // The large values sit exactly where the sample looks (16 evenly spread
  // runs of 4096), everything else is small: the guess lets too few through.
  std::vector<float> skewed(n);
  for (std::size_t i = 0; i < n; ++i) skewed[i] = 1e-6f * gaussian[i];
  for (std::size_t r = 0; r < 16; ++r) {
    const std::size_t first = (n - 4096) * r / 15;
    for (std::size_t i = first; i < first + 4096; ++i) skewed[i] = 1.0f + std::abs(gaussian[i]);
  }
  check(skewed, 0.1, "sample misjudges");
  // Few distinct magnitudes: many ties at the threshold.
  std::vector<float> ties(n);
  std::uint32_t x = 99u;
  for (auto& f : ties) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(1 + (x >> 16) % 5) * ((x >> 8) & 1 ? -1.0f : 1.0f);
  }
  check(ties, 0.1, "ties");
  check(ties, 0.3, "ties");
}

TEST(CodecPropertyTest, SignDecodesToSignedBlockMeanMagnitude) {
  auto c = codec("sign");
  for (auto n : kLengths) {
    auto v = normal(n, 5);
    auto d = round_trip(*c, v);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t b = i / kBlock * kBlock;
      double mean = 0.0;
      const std::size_t e = std::min(n, b + kBlock);
      for (std::size_t j = b; j < e; ++j) mean += std::abs(v[j]);
      mean /= static_cast<double>(e - b);
      ASSERT_NEAR(std::abs(d[i]), mean, 1e-5);
      ASSERT_EQ(std::signbit(d[i]), std::signbit(v[i]));
    }
  }
}

TEST(CodecPropertyTest, DecodeAccumulateEqualsWeightedDecode) {
  for (const auto& name : dc::codec_names()) {
    auto c = codec(name);
    auto v = normal(257, 11);
    std::vector<std::byte> payload;
    c->encode(v, payload);
    std::vector<float> plain(v.size());
    ASSERT_EQ(c->decode(payload, plain), dc::DecodeError::kOk);
    std::vector<float> acc(v.size(), 1.0f);
    ASSERT_EQ(c->decode_accumulate(payload, acc, 0.25f), dc::DecodeError::kOk);
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_FLOAT_EQ(acc[i], 1.0f + 0.25f * plain[i]) << name;
  }
}

TEST(CodecPropertyTest, EveryCodecRefusesTruncationTrailingBytesAndBitFlips) {
  for (const auto& name : dc::codec_names()) {
    auto c = codec(name);
    auto v = normal(300, 13);
    std::vector<std::byte> good;
    c->encode(v, good);
    std::vector<float> out(300, 42.0f);
    auto cut = good;
    cut.resize(good.size() - 1);
    EXPECT_EQ(c->decode(cut, out), dc::DecodeError::kTruncated) << name;
    auto longer = good;
    longer.push_back(std::byte{0});
    EXPECT_EQ(c->decode(longer, out), dc::DecodeError::kLengthMismatch) << name;
    for (std::size_t at : {dc::kWireHeaderSize, good.size() / 2, good.size() - 1}) {
      auto flipped = good;
      flipped[at] ^= std::byte{0x10};
      EXPECT_EQ(c->decode(flipped, out), dc::DecodeError::kChecksumMismatch) << name << " at " << at;
    }
    // A payload of one codec handed to another is refused, not misread.
    auto other = codec(name == "none" ? "fp16" : "none");
    EXPECT_EQ(other->decode(good, out), dc::DecodeError::kCodecMismatch) << name;
    for (float x : out) ASSERT_EQ(x, 42.0f) << name << ": output written by a refused decode";
  }
}

// A peer's payload whose values decode to NaN or infinity (no encoder writes
// one) is refused before anything is written, for every element codec.
TEST(CodecPropertyTest, NonFiniteValuesWithValidChecksumsAreRefused) {
  auto v = normal(300, 23);
  struct Bad {
    const char* codec;
    std::size_t width;
    std::vector<std::uint32_t> words;  // NaN, +inf, -inf in the codec's format
  };
  const std::vector<Bad> cases = {
      {"none", 4, {0x7FC00000u, 0x7F800000u, 0xFF800000u}},
      {"fp16", 2, {0x7E00u, 0x7C00u, 0xFC00u}},
      {"bf16", 2, {0x7FC0u, 0x7F80u, 0xFF80u}},
  };
  for (const auto& bad : cases) {
    auto c = codec(bad.codec);
    for (std::uint32_t word : bad.words)
      for (std::size_t at : {std::size_t{0}, std::size_t{137}, std::size_t{299}}) {
        std::vector<std::byte> p;
        ASSERT_EQ(c->encode(v, p), dc::EncodeError::kOk);
        std::memcpy(p.data() + dc::kWireHeaderSize + at * bad.width, &word, bad.width);
        reseal(p);
        std::vector<float> out(300, 42.0f);
        EXPECT_EQ(c->decode(p, out), dc::DecodeError::kNonFiniteValue) << bad.codec << " " << word << " at " << at;
        EXPECT_EQ(c->decode_accumulate(p, out, 0.5f), dc::DecodeError::kNonFiniteValue) << bad.codec;
        for (float x : out) ASSERT_EQ(x, 42.0f) << bad.codec << ": output written by a refused decode";
      }
  }
}

TEST(CodecPropertyTest, CraftedBodiesWithValidChecksumsAreRefused) {
  std::vector<float> out(300, 42.0f);
  auto v = normal(300, 17);
  // Non-finite and negative scales (scales lead the body of blockwise codecs).
  for (const std::string name : {"int8", "int4", "sign"}) {
    auto c = codec(name);
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -1.0f}) {
      std::vector<std::byte> p;
      c->encode(v, p);
      std::memcpy(p.data() + dc::kWireHeaderSize + 4, &bad, 4);
      reseal(p);
      EXPECT_EQ(c->decode(p, out), dc::DecodeError::kNonFiniteScale) << name << " " << bad;
    }
  }
  // int8's value -128 is never produced; int4's nibble 0 likewise.
  {
    auto c = codec("int8");
    std::vector<std::byte> p;
    c->encode(v, p);
    p.back() = std::byte{0x80};
    reseal(p);
    EXPECT_EQ(c->decode(p, out), dc::DecodeError::kCorruptBody);
  }
  // topk: an index beyond the end, and a count larger than the vector.
  {
    auto c = codec("topk", false, 0.01);
    std::vector<std::byte> p;
    c->encode(v, p);
    auto far = p;
    far[dc::kWireHeaderSize + 8] = std::byte{0x7F};  // first gap: index 127
    far[dc::kWireHeaderSize + 9] = std::byte{0x7F};  // second gap pushes past 300
    far[dc::kWireHeaderSize + 10] = std::byte{0x7F};
    reseal(far);
    EXPECT_NE(c->decode(far, out), dc::DecodeError::kOk);
    auto many = p;
    const std::uint64_t k = 301;
    std::memcpy(many.data() + dc::kWireHeaderSize, &k, 8);
    reseal(many);
    EXPECT_EQ(c->decode(many, out), dc::DecodeError::kCorruptBody);
  }
  for (float x : out) ASSERT_EQ(x, 42.0f);
}

TEST(ErrorFeedbackTest, TransmittedSumTracksTrueSumAndResidualStaysBounded) {
  const std::size_t n = 2000;
  for (const std::string name : {"topk", "int4", "sign", "chunk-topk"}) {
    auto c = codec(name, false, 0.05);
    dc::ErrorFeedback feedback(n);
    std::vector<double> true_sum(n, 0.0), sent_sum(n, 0.0);
    std::vector<std::byte> payload;
    std::vector<float> sent(n);
    double residual_at_100 = 0.0;
    for (int round = 1; round <= 300; ++round) {
      auto delta = normal(n, static_cast<std::uint32_t>(round), 0.01f);
      ASSERT_EQ(feedback.encode(*c, delta, payload, sent, static_cast<std::uint64_t>(round)), dc::EncodeError::kOk);
      for (std::size_t i = 0; i < n; ++i) {
        true_sum[i] += delta[i];
        sent_sum[i] += sent[i];
      }
      double gap = 0.0, residual = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        gap = std::max(gap, std::abs(true_sum[i] - sent_sum[i] - feedback.residual()[i]));
        residual += double(feedback.residual()[i]) * feedback.residual()[i];
      }
      // What was not sent is exactly what the residual holds.
      ASSERT_LT(gap, 1e-4) << name << " round " << round;
      if (round == 100) residual_at_100 = std::sqrt(residual);
      if (round == 300) {
        EXPECT_LT(std::sqrt(residual), 2.0 * residual_at_100) << name << ": residual keeps growing";
      }
    }
    double true_norm = 0.0, err_norm = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      true_norm += true_sum[i] * true_sum[i];
      err_norm += (true_sum[i] - sent_sum[i]) * (true_sum[i] - sent_sum[i]);
    }
    EXPECT_LT(std::sqrt(err_norm), 0.5 * std::sqrt(true_norm)) << name;
  }
}
