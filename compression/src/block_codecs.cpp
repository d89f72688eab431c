// Blockwise codecs: int8 and int4 absmax quantization and 1-bit sign, each
// with one fp32 scale per block of `block` elements stored before the values.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "codec_util.h"
#include "diloco/compression/codec.h"

namespace diloco::compression::detail {
namespace {

// Largest |x| of a finite block: on the bits, where integer order equals float
// order for non-negative values, so the loop vectorizes without fast-math.
DILOCO_CLONES float block_absmax(const float* x, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, 4);
    u &= 0x7FFFFFFFu;
    m = u > m ? u : m;
  }
  return bits_float(m);
}

// Symmetric absmax quantization to integers in [-levels, levels].
// Round to nearest even via the 1.5 * 2^23 trick (exact for |v| < 2^22), or
// stochastic: floor(v + u), u uniform in [0, 1), which is unbiased.
DILOCO_CLONES void quantize_block(const float* x, std::size_t n, float inv_scale, int levels, bool stochastic,
                    std::uint64_t seed, std::uint64_t first_index, std::int8_t* q) {
  const float lim = static_cast<float>(levels);
  if (!stochastic) {
    constexpr float kMagic = 12582912.0f;
    for (std::size_t i = 0; i < n; ++i) {
      float v = x[i] * inv_scale;
      v = std::min(std::max(v, -lim), lim);
      q[i] = static_cast<std::int8_t>(static_cast<int>((v + kMagic) - kMagic));
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      float v = x[i] * inv_scale;
      v = std::min(std::max(v, -lim), lim);
      // Offset so truncation is floor; clamp again since v + u may reach lim + 1.
      int r = static_cast<int>(v + uniform01(seed, first_index + i) + 256.0f) - 256;
      q[i] = static_cast<std::int8_t>(std::min(r, levels));
    }
  }
}

// out = q * step, or out += weight * q * step: straight into the output.
DILOCO_CLONES void dequantize_int8(const std::int8_t* q, std::size_t n, float step,
                                                                      float* out, bool accumulate, float weight) {
  if (!accumulate) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * step;
  } else {
    const float scaled = weight * step;
    for (std::size_t i = 0; i < n; ++i) out[i] += static_cast<float>(q[i]) * scaled;
  }
}

// Mean |x| of a block, summed in double. Eight partial sums, so the adds do
// not wait on each other (one chain of dependent adds ran sign's encode at a
// tenth of memcpy); the result differs from a sequential sum only below
// double precision, far under the float it is rounded to.
DILOCO_CLONES float block_mean_abs(const float* x, std::size_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) lanes[j] += static_cast<double>(bits_float(float_bits(x[i + j]) & 0x7FFFFFFFu));
  double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum += std::abs(x[i]);
  return static_cast<float>(sum / static_cast<double>(n));
}

// Sign bits of x[0, n): bit j of byte b is set when x[8b + j] is negative
// (its sign bit), eight at a time without branches.
DILOCO_CLONES void pack_signs(const float* x, std::size_t n, unsigned char* out) {
  const std::size_t whole = n / 8;
  for (std::size_t b = 0; b < whole; ++b) {
    unsigned byte = 0;
    for (unsigned j = 0; j < 8; ++j) byte |= (float_bits(x[8 * b + j]) >> 31) << j;
    out[b] = static_cast<unsigned char>(byte);
  }
  if (n % 8 != 0) {
    unsigned byte = 0;
    for (std::size_t j = 0; j < n % 8; ++j) byte |= (float_bits(x[8 * whole + j]) >> 31) << j;
    out[whole] = static_cast<unsigned char>(byte);
  }
}

// Sign masks of the eight elements a byte of sign bits stands for: a
// contiguous load per byte instead of eight shifts of it, so unpacking a
// byte is one vector operation.
using SignMasks = std::array<std::array<std::uint32_t, 8>, 256>;
constexpr SignMasks make_sign_masks() {
  SignMasks t{};
  for (std::uint32_t b = 0; b < 256; ++b)
    for (std::uint32_t j = 0; j < 8; ++j) t[b][j] = ((b >> j) & 1u) << 31;
  return t;
}
constexpr SignMasks kSignMasks = make_sign_masks();

inline std::uint32_t sign_mask(const unsigned char* bits, std::size_t g) {
  return static_cast<std::uint32_t>((bits[g / 8] >> (g % 8)) & 1u) << 31;
}

// +-scale from the sign bits of elements [first, first + n), written as the
// float's sign bit: no branches. From a byte boundary on, a byte at a time.
DILOCO_CLONES void unpack_signs(const unsigned char* bits, std::size_t first, std::size_t n, float scale, float* out) {
  const std::uint32_t magnitude = float_bits(scale);
  std::size_t i = 0;
  if (first % 8 == 0)
    for (; i + 8 <= n; i += 8) {
      const auto& mask = kSignMasks[bits[(first + i) / 8]];
      for (std::size_t j = 0; j < 8; ++j) out[i + j] = bits_float(magnitude | mask[j]);
    }
  for (; i < n; ++i) out[i] = bits_float(magnitude | sign_mask(bits, first + i));
}

// Nibble g of the payload is element g (low nibble first), q offset by 8,
// for the elements [first, first + n) of q[0, n): pairs of whole bytes
// without a branch per value, then a half byte at either end.
DILOCO_CLONES void pack_nibbles(const std::int8_t* q, std::size_t first, std::size_t n, unsigned char* packed) {
  std::size_t i = 0;
  if (first % 2 == 1 && n > 0) {  // the high nibble of a byte the previous block began
    packed[first / 2] = static_cast<unsigned char>(packed[first / 2] | ((static_cast<unsigned>(q[0] + 8) & 0x0Fu) << 4));
    i = 1;
  }
  unsigned char* out = packed + (first + i) / 2;
  const std::size_t pairs = (n - i) / 2;
  for (std::size_t p = 0; p < pairs; ++p) {
    const unsigned lo = static_cast<unsigned>(q[i + 2 * p] + 8) & 0x0Fu;
    const unsigned hi = static_cast<unsigned>(q[i + 2 * p + 1] + 8) & 0x0Fu;
    out[p] = static_cast<unsigned char>(lo | (hi << 4));
  }
  if ((n - i) % 2 == 1) out[pairs] = static_cast<unsigned char>(static_cast<unsigned>(q[n - 1] + 8) & 0x0Fu);
}

// out[0, n) = (nibble - 8) * step from whole bytes (n even, or the last high
// nibble unused).
DILOCO_CLONES void unpack_nibbles(const unsigned char* bytes, std::size_t n, float step, float* out) {
  for (std::size_t p = 0; p < n / 2; ++p) {
    out[2 * p] = static_cast<float>(static_cast<int>(bytes[p] & 0x0Fu) - 8) * step;
    out[2 * p + 1] = static_cast<float>(static_cast<int>(bytes[p] >> 4) - 8) * step;
  }
  if (n % 2 == 1) out[n - 1] = static_cast<float>(static_cast<int>(bytes[n / 2] & 0x0Fu) - 8) * step;
}

class AbsmaxCodec final : public Codec {
 public:
  AbsmaxCodec(int bits, std::uint32_t block, bool stochastic)
      : bits_(bits), levels_(bits == 8 ? 127 : 7), block_(block), stochastic_(stochastic) {}

  CodecId id() const override { return bits_ == 8 ? CodecId::kInt8 : CodecId::kInt4; }
  std::string_view name() const override { return bits_ == 8 ? "int8" : "int4"; }

 protected:
  std::uint32_t block_size() const override { return block_; }
  bool checks_finite() const override { return true; }

  std::size_t value_bytes(std::size_t count) const { return bits_ == 8 ? count : (count + 1) / 2; }

  std::size_t body_size(std::size_t count) const override {
    return blocks_for(count, block_) * sizeof(float) + value_bytes(count);
  }

  std::size_t encode_body(std::span<const float> values, std::span<std::byte> body,
                          std::uint64_t seed) const override {
    const std::size_t n = values.size();
    const std::size_t blocks = blocks_for(n, block_);
    std::byte* scales = body.data();
    std::byte* packed = body.data() + blocks * sizeof(float);
    std::vector<std::int8_t> q(block_ + 1);
    std::vector<float> tiny(block_);
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t first = b * block_;
      const std::size_t len = std::min<std::size_t>(block_, n - first);
      // The block's scale is its absmax; element = q / levels * absmax.
      const float absmax = block_absmax(values.data() + first, len);
      if (!is_finite(absmax)) return kNonFinite;  // the bit-wise max of |x| is inf/NaN iff some x is
      std::memcpy(scales + b * sizeof(float), &absmax, sizeof(float));
      if (absmax >= kTiny) {
        quantize_block(values.data() + first, len, static_cast<float>(levels_) / absmax, levels_, stochastic_, seed,
                       first, q.data());
      } else {
        // levels / absmax would overflow: normalize by division first.
        for (std::size_t i = 0; i < len; ++i) tiny[i] = absmax > 0.0f ? values[first + i] / absmax : 0.0f;
        quantize_block(tiny.data(), len, static_cast<float>(levels_), levels_, stochastic_, seed, first, q.data());
      }
      if (bits_ == 8) {
        std::memcpy(packed + first, q.data(), len);
      } else {
        pack_nibbles(q.data(), first, len, reinterpret_cast<unsigned char*>(packed));
      }
    }
    return body_size(n);
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    const std::size_t n = out.size();
    const std::size_t blocks = blocks_for(n, block_);
    std::vector<float> scales;
    const unsigned char* packed = nullptr;
    if (auto e = split_blockwise_body(body, n, block_, scales, packed); e != DecodeError::kOk) return e;
    if (bits_ == 4) {
      // Values range 1..15 (q + 8); 0 never comes from the encoder.
      unsigned bad = 0;
      for (std::size_t i = 0; i < n / 2; ++i) bad |= ((packed[i] & 0x0Fu) == 0) | ((packed[i] >> 4) == 0);
      if (n % 2 == 1) bad |= (packed[n / 2] & 0x0Fu) == 0;
      if (bad) return DecodeError::kCorruptBody;
      if (n % 2 == 1 && (packed[n / 2] >> 4) != 0) return DecodeError::kCorruptBody;
    } else {
      unsigned bad = 0;  // a reduction, not an early exit, so it vectorizes
      for (std::size_t g = 0; g < n; ++g) bad |= packed[g] == 0x80u;
      if (bad) return DecodeError::kCorruptBody;
    }
    float buf[kChunk];
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t first = b * block_;
      const std::size_t len = std::min<std::size_t>(block_, n - first);
      const float absmax = scales[b];
      const bool tiny = absmax < kTiny;  // absmax / levels would lose precision to underflow
      if (bits_ == 8 && !tiny) {
        dequantize_int8(reinterpret_cast<const std::int8_t*>(packed) + first, len,
                        absmax / static_cast<float>(levels_), out.data() + first, accumulate, weight);
        continue;
      }
      for (std::size_t c = 0; c < len; c += kChunk) {
        const std::size_t m = std::min(kChunk, len - c);
        const std::size_t base = first + c;
        if (bits_ == 4 && !tiny && base % 2 == 0) {  // whole bytes: two values each, no branch per value
          unpack_nibbles(packed + base / 2, m, absmax / static_cast<float>(levels_), buf);
          store(out.data() + base, buf, m, accumulate, weight);
          continue;
        }
        for (std::size_t i = 0; i < m; ++i) {
          const std::size_t g = base + i;
          const int q = bits_ == 8 ? static_cast<std::int8_t>(packed[g])
                                   : static_cast<int>((g % 2 == 0) ? (packed[g / 2] & 0x0Fu) : (packed[g / 2] >> 4)) - 8;
          buf[i] = tiny ? static_cast<float>(q) * absmax / static_cast<float>(levels_)
                        : static_cast<float>(q) * (absmax / static_cast<float>(levels_));
        }
        store(out.data() + base, buf, m, accumulate, weight);
      }
    }
    return DecodeError::kOk;
  }

 private:
  // Below this absmax, levels / absmax overflows fp32.
  static constexpr float kTiny = 1e-30f;

  int bits_;
  int levels_;
  std::uint32_t block_;
  bool stochastic_;
};

// One bit per element (set = negative) and the block's mean magnitude, so
// each element decodes to +-mean|x|: signSGD with a per-block scale.
class SignCodec final : public Codec {
 public:
  explicit SignCodec(std::uint32_t block) : block_(block) {}
  CodecId id() const override { return CodecId::kSign; }
  std::string_view name() const override { return "sign"; }

 protected:
  std::uint32_t block_size() const override { return block_; }
  std::size_t body_size(std::size_t count) const override {
    return blocks_for(count, block_) * sizeof(float) + (count + 7) / 8;
  }

  std::size_t encode_body(std::span<const float> values, std::span<std::byte> body, std::uint64_t) const override {
    const std::size_t n = values.size();
    const std::size_t blocks = blocks_for(n, block_);
    auto* bits = reinterpret_cast<unsigned char*>(body.data() + blocks * sizeof(float));
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t first = b * block_;
      const std::size_t len = std::min<std::size_t>(block_, n - first);
      const float scale = block_mean_abs(values.data() + first, len);
      std::memcpy(body.data() + b * sizeof(float), &scale, sizeof(float));
    }
    pack_signs(values.data(), n, bits);
    return body_size(n);
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    const std::size_t n = out.size();
    const std::size_t blocks = blocks_for(n, block_);
    std::vector<float> scales;
    const unsigned char* bits = nullptr;
    if (auto e = split_blockwise_body(body, n, block_, scales, bits); e != DecodeError::kOk) return e;
    if (n % 8 != 0 && (bits[n / 8] >> (n % 8)) != 0) return DecodeError::kCorruptBody;
    float buf[kChunk];
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t first = b * block_;
      const std::size_t len = std::min<std::size_t>(block_, n - first);
      for (std::size_t c = 0; c < len; c += kChunk) {
        const std::size_t m = std::min(kChunk, len - c);
        if (!accumulate) {
          unpack_signs(bits, first + c, m, scales[b], out.data() + first + c);
          continue;
        }
        unpack_signs(bits, first + c, m, scales[b], buf);  // in cache, then added
        store(out.data() + first + c, buf, m, true, weight);
      }
    }
    return DecodeError::kOk;
  }

 private:
  std::uint32_t block_;
};

}  // namespace

std::unique_ptr<Codec> make_int8_codec(const CodecConfig& c) {
  return std::make_unique<AbsmaxCodec>(8, c.block, c.stochastic_rounding);
}
std::unique_ptr<Codec> make_int4_codec(const CodecConfig& c) {
  return std::make_unique<AbsmaxCodec>(4, c.block, c.stochastic_rounding);
}
std::unique_ptr<Codec> make_sign_codec(const CodecConfig& c) { return std::make_unique<SignCodec>(c.block); }

}  // namespace diloco::compression::detail
