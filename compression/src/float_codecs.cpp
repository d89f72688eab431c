// Element-wise codecs: fp32 (lossless), fp16 and bf16 (round to nearest even).
#include <algorithm>
#include <cstring>

#include "codec_util.h"
#include "diloco/compression/codec.h"
#include "diloco/compression/crc32c.h"

namespace diloco::compression::detail {
namespace {

// Bodies at least this large are written with streaming stores (larger than
// the caches they would otherwise evict everything else from).
constexpr std::size_t kStreamBytes = std::size_t{8} << 20;

class NoneCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kNone; }
  std::string_view name() const override { return "none"; }
  bool lossless() const override { return true; }

 protected:
  std::size_t body_size(std::size_t count) const override { return count * sizeof(float); }
  bool checks_finite() const override { return true; }

  std::size_t encode_body(std::span<const float> values, std::span<std::byte> body, std::uint64_t seed) const override {
    std::uint32_t crc = 0;
    return encode_body_crc(values, body, seed, crc);
  }

  // One pass in pieces of 64 KiB: each piece is checked for NaN/inf and
  // checksummed while it is in cache, then streamed into the body (the
  // checksum of the source bytes is the body's), instead of three passes
  // over memory (check, copy, checksum) for the whole vector.
  std::size_t encode_body_crc(std::span<const float> values, std::span<std::byte> body, std::uint64_t,
                              std::uint32_t& crc) const override {
    constexpr std::size_t kPiece = 16384;
    // A body that fits in cache is left there for the send that follows.
    const bool stream = values.size_bytes() >= kStreamBytes;
    crc = 0;
    for (std::size_t i = 0; i < values.size(); i += kPiece) {
      const auto piece = std::as_bytes(values.subspan(i, std::min(kPiece, values.size() - i)));
      if (!all_finite(values.subspan(i, piece.size() / sizeof(float)))) {
        finish_streaming();
        return kNonFinite;
      }
      crc = crc32c(piece, crc);
      if (stream) copy_streaming(body.data() + i * sizeof(float), piece.data(), piece.size());
      else std::memcpy(body.data() + i * sizeof(float), piece.data(), piece.size());
    }
    finish_streaming();
    return values.size_bytes();
  }

  bool piece_valid(std::span<const std::byte> piece) const override {
    return words_finite<std::uint32_t>(piece.data(), piece.size() / sizeof(float), 0x7F800000u);
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    if (!accumulate) {  // a copy; one larger than the caches bypasses them, as memcpy's does
      if (body.size() >= kStreamBytes) {
        copy_streaming(reinterpret_cast<std::byte*>(out.data()), body.data(), body.size());
        finish_streaming();
      } else if (!body.empty()) {
        std::memcpy(out.data(), body.data(), body.size());
      }
      return DecodeError::kOk;
    }
    float buf[kChunk];
    for (std::size_t i = 0; i < out.size(); i += kChunk) {
      const std::size_t n = std::min(kChunk, out.size() - i);
      std::memcpy(buf, body.data() + i * sizeof(float), n * sizeof(float));
      store(out.data() + i, buf, n, accumulate, weight);
    }
    return DecodeError::kOk;
  }
};

bool floats_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    std::uint32_t u;
    std::memcpy(&u, in + j, 4);
    const std::uint32_t sign = u & 0x80000000u;
    // Round to nearest even (inputs are finite); saturate at bf16's largest
    // finite value instead of rounding up to inf.
    u = std::min<std::uint32_t>((u & 0x7FFFFFFFu) + 0x7FFFu + ((u >> 16) & 1u), 0x7F7F0000u) | sign;
    out[j] = static_cast<std::uint16_t>(u >> 16);
  }
  return true;  // bf16 leaves the finiteness check to the framing
}

void bf16_to_floats(const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint32_t u = static_cast<std::uint32_t>(in[j]) << 16;
    std::memcpy(out + j, &u, 4);
  }
}

using ToHalves = bool (*)(const float*, std::uint16_t*, std::size_t);
using ToFloats = void (*)(const std::uint16_t*, float*, std::size_t);

// A 16-bit float format: the same framing, two conversion functions.
// kChecks: the encode function reports non-finite input itself.
// kExponent: the format's exponent bits (all set: NaN or infinity).
template <CodecId kId, ToHalves kEncode, ToFloats kDecode, bool kChecks, std::uint16_t kExponent>
class HalfWidthCodec final : public Codec {
 public:
  explicit HalfWidthCodec(std::string_view name) : name_(name) {}
  CodecId id() const override { return kId; }
  std::string_view name() const override { return name_; }

 protected:
  std::size_t body_size(std::size_t count) const override { return count * 2; }
  bool checks_finite() const override { return kChecks; }

  std::size_t encode_body(std::span<const float> values, std::span<std::byte> body, std::uint64_t) const override {
    // The body follows a 32-byte header in a vector, so it is 2-byte aligned.
    auto* out = reinterpret_cast<std::uint16_t*>(body.data());
    if (!kEncode(values.data(), out, values.size()) && kChecks) return kNonFinite;
    return values.size() * 2;
  }

  bool piece_valid(std::span<const std::byte> piece) const override {
    return words_finite<std::uint16_t>(piece.data(), piece.size() / 2, kExponent);
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    std::uint16_t halves[kChunk];
    float floats[kChunk];
    for (std::size_t i = 0; i < out.size(); i += kChunk) {
      const std::size_t n = std::min(kChunk, out.size() - i);
      std::memcpy(halves, body.data() + i * 2, n * 2);  // a payload may sit at any offset
      if (!accumulate) {
        kDecode(halves, out.data() + i, n);
      } else {
        kDecode(halves, floats, n);
        store(out.data() + i, floats, n, true, weight);
      }
    }
    return DecodeError::kOk;
  }

 private:
  std::string_view name_;
};

}  // namespace

std::unique_ptr<Codec> make_none_codec() { return std::make_unique<NoneCodec>(); }
std::unique_ptr<Codec> make_fp16_codec() {
  return std::make_unique<HalfWidthCodec<CodecId::kFp16, floats_to_halves, halves_to_floats, true, 0x7C00u>>("fp16");
}
std::unique_ptr<Codec> make_bf16_codec() {
  return std::make_unique<HalfWidthCodec<CodecId::kBf16, floats_to_bf16, bf16_to_floats, false, 0x7F80u>>("bf16");
}

}  // namespace diloco::compression::detail
