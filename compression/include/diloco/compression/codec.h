// Pseudo-gradient codecs: spans of floats in, checked payload bytes out, and back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "diloco/compression/wire_format.h"

namespace diloco::compression {

// Wire ids; never renumber (payloads carry them).
enum class CodecId : std::uint8_t {
  kNone = 0,     // raw fp32, lossless
  kFp16 = 1,     // IEEE half, round to nearest even, saturating at +-65504
  kBf16 = 2,     // bfloat16, round to nearest even, saturating at its largest finite value
  kInt8 = 3,     // blockwise absmax, 8-bit
  kInt4 = 4,     // blockwise absmax, 4-bit, two per byte
  kTopk = 5,     // largest-magnitude entries, fp16 values
  kTopkInt8 = 6, // largest-magnitude entries, blockwise int8 values
  kSign = 7,     // one bit per element, per-block mean magnitude
  kChunkTopk = 8,  // largest-magnitude entries of each block, low-bit values (SparseLoCo)
};

struct CodecConfig {
  std::string name = "none";
  std::uint32_t block = 256;          // elements per scale (int8, int4, sign, topk+int8); per chunk (chunk-topk)
  bool stochastic_rounding = false;   // int8/int4/chunk-topk: unbiased rounding from a seeded hash
  double topk_ratio = 0.1;            // topk, chunk-topk: share of entries kept, in (0, 1]
  unsigned value_bits = 2;            // chunk-topk: bits per kept value (sign included): 2, 4 or 8
};

enum class EncodeError : std::uint8_t {
  kOk = 0,
  kNonFiniteInput,  // NaN or infinity in the values: nothing was encoded
};

// Names accepted by `compression.codec`, in the order they are documented.
std::vector<std::string> codec_names();

// True when `id` names a codec this build can decode.
bool codec_id_known(std::uint8_t id);

// One codec. encode() writes the full payload (header + body); decode()
// checks the header and the body before writing a single output element, so
// a refused payload leaves `out` untouched. Codecs are stateless and may be
// shared between threads.
class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const = 0;
  virtual std::string_view name() const = 0;
  virtual bool lossless() const { return false; }

  // Encodes `values` into `payload` (resized to fit). `seed` drives stochastic
  // rounding, so the same (values, seed) always gives the same bytes. On
  // kNonFiniteInput the payload is left empty.
  EncodeError encode(std::span<const float> values, std::vector<std::byte>& payload,
                     std::uint64_t seed = 0) const;

  // out[i] = decoded[i]. out.size() must equal the payload's element count.
  DecodeError decode(std::span<const std::byte> payload, std::span<float> out) const;

  // acc[i] += weight * decoded[i], without a temporary buffer per peer.
  DecodeError decode_accumulate(std::span<const std::byte> payload, std::span<float> acc,
                                float weight) const;

  // Payload bytes for `count` values (an estimate for data-dependent codecs).
  std::size_t payload_size(std::size_t count) const { return kWireHeaderSize + body_size(count); }

  // Where a vector may be cut so that encoding the parts one by one gives the
  // same values as encoding it whole: at multiples of this many elements (a
  // block). 0 when it may not be cut: what top-k keeps depends on all of it.
  std::size_t split_granule() const {
    if (!fixed_body_size()) return 0;
    return block_size() > 0 ? block_size() : 1;
  }

 protected:
  virtual std::size_t body_size(std::size_t count) const = 0;
  // False when the body length depends on the data (topk): decode_body then
  // checks the length itself.
  virtual bool fixed_body_size() const { return true; }
  virtual std::uint32_t block_size() const { return 0; }
  // True when encode_body detects non-finite input itself (in a pass it makes
  // anyway), so the framing can skip its own check.
  virtual bool checks_finite() const { return false; }
  static constexpr std::size_t kNonFinite = static_cast<std::size_t>(-1);
  // Writes the body into `body` (already sized to body_size(values.size()))
  // and returns the bytes used, or kNonFinite (only if checks_finite()).
  virtual std::size_t encode_body(std::span<const float> values, std::span<std::byte> body,
                                  std::uint64_t seed) const = 0;
  // encode_body, and the CRC32C of the bytes used into `crc`. A codec that
  // writes its body in order overrides it to checksum each piece while it is
  // still in cache; the default checksums the body in a second pass.
  virtual std::size_t encode_body_crc(std::span<const float> values, std::span<std::byte> body, std::uint64_t seed,
                                      std::uint32_t& crc) const;
  // Checks the words of body bytes [offset, offset + piece.size()) (offset
  // a multiple of 4), while they are in cache for the checksum: false
  // refuses the payload as holding a non-finite value. The element-wise
  // codecs check their values here instead of in a pass of their own.
  virtual bool piece_valid(std::span<const std::byte> /*piece*/) const { return true; }
  // `body` passed the header, checksum and piece checks. Must check
  // everything else (scales, indices, lengths) before writing to `out`.
  virtual DecodeError decode_body(std::span<const std::byte> body, std::span<float> out,
                                  bool accumulate, float weight) const = 0;

 private:
  DecodeError check(std::span<const std::byte> payload, std::size_t expected_count,
                    std::span<const std::byte>& body) const;
};

// Returns nullptr and sets `error` for an unknown name or a bad setting.
std::unique_ptr<Codec> make_codec(const CodecConfig& config, std::string* error = nullptr);
inline std::unique_ptr<Codec> make_codec(std::string_view name) {
  CodecConfig c;
  c.name = std::string(name);
  return make_codec(c);
}

// True when every value is finite (checked on the bits, so fast-math cannot
// remove it).
bool all_finite(std::span<const float> values);

// The sum of the squares of `values`, in double, over eight interleaved
// partial sums (one running sum is bound by the latency of each addition).
double sum_of_squares(std::span<const float> values);

}  // namespace diloco::compression
