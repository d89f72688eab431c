// The fp32 codec and the checked wire format: round trips and every refusal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "diloco/compression/codec.h"
#include "diloco/compression/crc32c.h"

namespace dc = diloco::compression;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<std::byte> encode_none(const std::vector<float>& values) {
  std::vector<std::byte> payload;
  dc::make_codec("none")->encode(values, payload);
  return payload;
}

}  // namespace

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  const char* text = "123456789";
  EXPECT_EQ(dc::crc32c(std::as_bytes(std::span<const char>(text, 9))), 0xE3069283u);
  EXPECT_EQ(dc::crc32c({}), 0u);
}

TEST(Crc32cTest, ExtendsIncrementally) {
  std::vector<std::byte> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7 + 3);
  const auto whole = dc::crc32c(data);
  const auto part = dc::crc32c(std::span<const std::byte>(data).subspan(0, 333));
  EXPECT_EQ(dc::crc32c(std::span<const std::byte>(data).subspan(333), part), whole);
}

TEST(Crc32cTest, FastPathEqualsTheTableReferenceAtEveryLengthAndAlignment) {
  // Lengths around the three-stream block sizes (3 x 256 and 3 x 8192 bytes)
  // and beyond, at every alignment of the first byte.
  std::vector<std::byte> data(3 * 8192 * 3 + 4096);
  std::uint32_t x = 2463534242u;
  for (auto& b : data) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  for (const std::size_t n : {0u, 1u, 7u, 8u, 767u, 768u, 769u, 1536u, 24575u, 24576u, 24577u, 49152u + 800u,
                              3u * 8192u * 3u}) {
    for (std::size_t offset = 0; offset < 8; ++offset) {
      const auto span = std::span<const std::byte>(data).subspan(offset, n);
      ASSERT_EQ(dc::crc32c(span), dc::crc32c_portable(span)) << n << " at " << offset;
      ASSERT_EQ(dc::crc32c(span, 0x12345678u), dc::crc32c_portable(span, 0x12345678u)) << n << " at " << offset;
    }
  }
}

TEST(CodecTest, RegistryKnowsNoneAndRejectsUnknownNames) {
  EXPECT_NE(dc::make_codec("none"), nullptr);
  EXPECT_EQ(dc::make_codec("zip"), nullptr);
  EXPECT_TRUE(dc::make_codec("none")->lossless());
}

TEST(CodecTest, NoneRoundTripIsExactForEmptySingleAndOddLengths) {
  auto codec = dc::make_codec("none");
  for (std::size_t n : {0u, 1u, 7u, 1023u, 4097u}) {
    auto values = random_values(n, static_cast<std::uint32_t>(n));
    if (n > 3) {
      values[0] = 0.0f;
      values[1] = std::numeric_limits<float>::denorm_min();
      values[2] = std::numeric_limits<float>::max();
    }
    std::vector<std::byte> payload;
    codec->encode(values, payload);
    EXPECT_EQ(payload.size(), dc::kWireHeaderSize + n * sizeof(float));
    std::vector<float> out(n, -1.0f);
    ASSERT_EQ(codec->decode(payload, out), dc::DecodeError::kOk) << n;
    EXPECT_EQ(std::memcmp(out.data(), values.data(), n * sizeof(float)), 0) << n;
  }
}

TEST(CodecTest, DecodeAccumulateAddsWeightedValues) {
  auto codec = dc::make_codec("none");
  const std::vector<float> values{1.0f, -2.0f, 4.0f};
  auto payload = encode_none(values);
  std::vector<float> acc{10.0f, 10.0f, 10.0f};
  ASSERT_EQ(codec->decode_accumulate(payload, acc, 0.5f), dc::DecodeError::kOk);
  EXPECT_EQ(acc, (std::vector<float>{10.5f, 9.0f, 12.0f}));
}

// Each malformed payload class: the decoder refuses it and leaves `out` alone.
class MalformedPayloadTest : public ::testing::Test {
 protected:
  void expect(std::vector<std::byte> payload, dc::DecodeError error, std::size_t count = 5) {
    std::vector<float> out(count, 42.0f);
    EXPECT_EQ(codec_->decode(payload, out), error) << dc::to_string(error);
    for (float v : out) EXPECT_EQ(v, 42.0f);
  }
  std::unique_ptr<dc::Codec> codec_ = dc::make_codec("none");
  std::vector<std::byte> good_ = encode_none({1, 2, 3, 4, 5});
};

TEST_F(MalformedPayloadTest, Truncated) {
  expect({}, dc::DecodeError::kTruncated);
  expect(std::vector<std::byte>(good_.begin(), good_.begin() + 10), dc::DecodeError::kTruncated);
  expect(std::vector<std::byte>(good_.begin(), good_.end() - 1), dc::DecodeError::kTruncated);
}

TEST_F(MalformedPayloadTest, BadMagic) {
  auto p = good_;
  p[0] = std::byte{'X'};
  expect(p, dc::DecodeError::kBadMagic);
}

TEST_F(MalformedPayloadTest, UnsupportedVersion) {
  auto p = good_;
  p[4] = std::byte{99};
  expect(p, dc::DecodeError::kUnsupportedVersion);
}

TEST_F(MalformedPayloadTest, UnknownCodec) {
  auto p = good_;
  p[6] = std::byte{200};
  expect(p, dc::DecodeError::kUnknownCodec);
}

TEST_F(MalformedPayloadTest, TrailingBytes) {
  auto p = good_;
  p.push_back(std::byte{0});
  expect(p, dc::DecodeError::kLengthMismatch);
}

TEST_F(MalformedPayloadTest, CountMismatch) { expect(good_, dc::DecodeError::kCountMismatch, 4); }

TEST_F(MalformedPayloadTest, ChecksumMismatch) {
  auto p = good_;
  p.back() ^= std::byte{0x01};
  expect(p, dc::DecodeError::kChecksumMismatch);
}

TEST_F(MalformedPayloadTest, DeclaredCountDisagreesWithBody) {
  // A header claiming 6 elements over a 5-element body, checksum still valid.
  auto p = good_;
  const std::uint64_t six = 6;
  std::memcpy(p.data() + 8, &six, sizeof(six));
  expect(p, dc::DecodeError::kLengthMismatch, 6);
}
