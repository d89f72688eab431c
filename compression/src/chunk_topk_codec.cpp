// Chunked top-k with low-bit values (SparseLoCo): the vector is cut into
// chunks of `block` elements; each chunk keeps its k = clamp(ceil(ratio x
// length), 1, length) largest |x| (ties to the lower index) and sends each as
// its position in the chunk and a sign plus (bits - 1) bits of magnitude,
// evenly spaced between the chunk's smallest and largest kept magnitude.
// The body's size depends only on the count, so a vector may be cut at
// chunk boundaries. Body:
//   [u8 bits][3 zero bytes][u32 k of a whole chunk]
//   [per chunk: smallest kept magnitude f32, largest f32]
//   [bit stream, least significant bit first: per chunk, per kept entry in
//    index order, its index in the chunk (bit_width(block - 1) bits, at
//    least 1), then its value (bits bits: the sign on top)]
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include "codec_util.h"
#include "diloco/compression/codec.h"
#include "magnitude_select.h"

namespace diloco::compression::detail {
namespace {

constexpr std::size_t kPrefix = 8;
constexpr std::size_t kScalesPerChunk = 2;

// Writes fields of up to 24 bits into a byte stream, four bytes at a time.
class BitWriter {
 public:
  explicit BitWriter(std::byte* out) : out_(out) {}
  void put(std::uint32_t value, unsigned bits) {
    acc_ |= static_cast<std::uint64_t>(value) << filled_;
    filled_ += bits;
    if (filled_ >= 32) {
      const auto word = static_cast<std::uint32_t>(acc_);
      std::memcpy(out_ + pos_, &word, 4);  // little-endian, as the reader takes bytes
      pos_ += 4;
      acc_ >>= 32;
      filled_ -= 32;
    }
  }
  std::size_t finish() {
    for (; filled_ > 0; filled_ = filled_ > 8 ? filled_ - 8 : 0) {
      out_[pos_++] = static_cast<std::byte>(acc_ & 0xFFu);
      acc_ >>= 8;
    }
    return pos_;
  }

 private:
  std::byte* out_;
  std::size_t pos_ = 0;
  std::uint64_t acc_ = 0;
  unsigned filled_ = 0;
};

// Reads them back; the caller has checked the stream holds every field.
class BitReader {
 public:
  explicit BitReader(const std::byte* in) : in_(in) {}
  std::uint32_t get(unsigned bits) {
    while (filled_ < bits) {
      acc_ |= static_cast<std::uint64_t>(in_[pos_++]) << filled_;
      filled_ += 8;
    }
    const auto value = static_cast<std::uint32_t>(acc_ & ((std::uint64_t{1} << bits) - 1));
    acc_ >>= bits;
    filled_ -= bits;
    return value;
  }

 private:
  const std::byte* in_;
  std::size_t pos_ = 0;
  std::uint64_t acc_ = 0;
  unsigned filled_ = 0;
};

// One chunk's winners, kept by each encoding thread between calls (fresh
// memory costs a page fault per 4 KB).
struct ChunkScratch {
  Scratch<std::uint32_t> index;
  Scratch<float> value;
  Scratch<std::uint32_t> magnitude;
  std::size_t capacity = 0;

  void reserve(std::size_t n) {
    if (n <= capacity) return;
    index = make_scratch<std::uint32_t>(n);
    value = make_scratch<float>(n);
    magnitude = make_scratch<std::uint32_t>(n);
    capacity = n;
  }
};

struct Selected {
  std::uint32_t smallest = 0;  // magnitude bits of the smallest winner
  std::uint32_t largest = 0;   // and of the largest
  bool finite = true;
};

// Leaves the k largest |x[0, n)| (ties to the lower index) at the front of
// `s`, in index order. Candidates are the entries at or above `guess`
// (magnitude bits; 0 takes every entry), found branch-free; when fewer than
// k qualify, every entry is a candidate, so the guess changes the speed,
// never the result. NaN and infinity are always candidates.
Selected select_chunk(const float* x, std::size_t n, std::size_t k, std::uint32_t guess, ChunkScratch& s) {
  std::size_t c = collect_at_least(x, 0, n, guess, s.index.get(), s.value.get(), 0);
  // Too few: a lower guess (a pass costs far less than selecting among
  // every entry), then every entry.
  if (c < k && guess > 0)
    c = collect_at_least(x, 0, n, magnitude_bits(bits_float(guess) * 0.6f), s.index.get(), s.value.get(), 0);
  if (c < k) c = collect_at_least(x, 0, n, 0, s.index.get(), s.value.get(), 0);
  Selected out;
  for (std::size_t i = 0; i < c; ++i) {
    s.magnitude[i] = magnitude_bits(s.value[i]);
    out.largest = std::max(out.largest, s.magnitude[i]);
  }
  if (out.largest >= 0x7F800000u) {
    out.finite = false;
    return out;
  }
  std::uint32_t* m = s.magnitude.get();
  std::nth_element(m, m + (k - 1), m + c, std::greater<>());
  const std::uint32_t threshold = m[k - 1];
  std::size_t ties = k - static_cast<std::size_t>(std::count_if(m, m + (k - 1), [&](std::uint32_t v) {
                       return v > threshold;
                     }));
  std::size_t end = 0;
  for (std::size_t i = 0; i < c; ++i) {
    const std::uint32_t mi = magnitude_bits(s.value[i]);
    const bool tie = mi == threshold && ties > 0;
    ties -= tie ? 1 : 0;
    s.index[end] = s.index[i];
    s.value[end] = s.value[i];
    end += (mi > threshold || tie) ? 1 : 0;
  }
  out.smallest = threshold;
  return out;
}

class ChunkTopkCodec final : public Codec {
 public:
  ChunkTopkCodec(double ratio, std::uint32_t chunk, unsigned bits, bool stochastic)
      : ratio_(ratio),
        chunk_(chunk),
        bits_(bits),
        index_bits_(std::max(1u, static_cast<unsigned>(std::bit_width(chunk - 1)))),
        levels_((1u << (bits - 1)) - 1),
        stochastic_(stochastic) {}

  CodecId id() const override { return CodecId::kChunkTopk; }
  std::string_view name() const override { return "chunk-topk"; }

 protected:
  std::uint32_t block_size() const override { return chunk_; }
  bool checks_finite() const override { return true; }

  std::size_t keep(std::size_t n) const {
    const auto k = static_cast<std::size_t>(std::ceil(ratio_ * static_cast<double>(n)));
    return std::clamp<std::size_t>(k, 1, n);
  }
  std::size_t chunks(std::size_t count) const { return blocks_for(count, chunk_); }
  std::size_t stream_bits(std::size_t count) const {
    const std::size_t whole = count / chunk_;
    const std::size_t rest = count % chunk_;
    return (whole * keep(chunk_) + (rest > 0 ? keep(rest) : 0)) * (index_bits_ + bits_);
  }
  std::size_t body_size(std::size_t count) const override {
    return kPrefix + chunks(count) * kScalesPerChunk * sizeof(float) + (stream_bits(count) + 7) / 8;
  }

  std::size_t encode_body(std::span<const float> values, std::span<std::byte> body, std::uint64_t seed) const override {
    const std::size_t n = values.size();
    const auto k_whole = static_cast<std::uint32_t>(keep(chunk_));
    std::memset(body.data(), 0, kPrefix);
    body[0] = static_cast<std::byte>(bits_);
    std::memcpy(body.data() + 4, &k_whole, 4);
    std::byte* scales = body.data() + kPrefix;
    BitWriter stream(scales + chunks(n) * kScalesPerChunk * sizeof(float));
    thread_local ChunkScratch scratch;
    scratch.reserve(chunk_ + 8);
    // Neighbouring chunks usually belong to the same tensor: a bit under the
    // last chunk's threshold keeps the candidates few.
    std::uint32_t guess = 0;
    for (std::size_t first = 0, c = 0; first < n; first += chunk_, ++c) {
      const std::size_t len = std::min<std::size_t>(chunk_, n - first);
      const std::size_t k = keep(len);
      const Selected sel = select_chunk(values.data() + first, len, k, guess, scratch);
      if (!sel.finite) return kNonFinite;
      guess = magnitude_bits(bits_float(sel.smallest) * 0.85f);
      const float lo = bits_float(sel.smallest);
      const float hi = bits_float(sel.largest);
      std::memcpy(scales + c * 8, &lo, 4);
      std::memcpy(scales + c * 8 + 4, &hi, 4);
      // Levels above the smallest: |v| at or above it, so adding a half (or a
      // uniform draw) and truncating rounds to nearest (or stochastically).
      const float per_level = hi > lo ? static_cast<float>(levels_ / (static_cast<double>(hi) - lo)) : 0.0f;
      const float levels = static_cast<float>(levels_);
      for (std::size_t i = 0; i < k; ++i) {
        const float v = scratch.value[i];
        const float at = std::min((std::fabs(v) - lo) * per_level, levels);
        const float offset = stochastic_ ? uniform01(seed, first + scratch.index[i]) : 0.5f;
        const auto q = hi > lo ? std::min(static_cast<std::uint32_t>(std::max(at, 0.0f) + offset), levels_) : levels_;
        const std::uint32_t sign = float_bits(v) >> 31;
        stream.put(scratch.index[i] | (((sign << (bits_ - 1)) | q) << index_bits_), index_bits_ + bits_);
      }
    }
    const std::size_t used = stream.finish();
    return static_cast<std::size_t>(scales - body.data()) + chunks(n) * kScalesPerChunk * sizeof(float) + used;
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    const std::size_t n = out.size();
    std::uint32_t k_whole;
    std::memcpy(&k_whole, body.data() + 4, 4);
    if (static_cast<unsigned>(body[0]) != bits_ || k_whole != keep(chunk_)) return DecodeError::kCodecMismatch;
    if (body[1] != std::byte{0} || body[2] != std::byte{0} || body[3] != std::byte{0}) return DecodeError::kCorruptBody;
    const std::byte* scales = body.data() + kPrefix;
    const std::byte* bits = scales + chunks(n) * kScalesPerChunk * sizeof(float);
    // Everything is checked before the first element is written.
    for (std::size_t c = 0; c < chunks(n); ++c) {
      float lo, hi;
      std::memcpy(&lo, scales + c * 8, 4);
      std::memcpy(&hi, scales + c * 8 + 4, 4);
      if (!is_finite(lo) || !is_finite(hi) || lo < 0.0f || hi < 0.0f) return DecodeError::kNonFiniteScale;
      if (lo > hi) return DecodeError::kCorruptBody;
    }
    BitReader check(bits);
    for (std::size_t first = 0; first < n; first += chunk_) {
      const std::size_t len = std::min<std::size_t>(chunk_, n - first);
      std::size_t next = 0;  // smallest index the next entry may take
      for (std::size_t i = 0, k = keep(len); i < k; ++i) {
        const std::size_t index = check.get(index_bits_);
        check.get(bits_);
        if (index < next || index >= len) return DecodeError::kCorruptBody;
        next = index + 1;
      }
    }
    if (!accumulate && n > 0) std::memset(out.data(), 0, n * sizeof(float));
    BitReader stream(bits);
    const std::uint32_t magnitude_mask = levels_;
    for (std::size_t first = 0, c = 0; first < n; first += chunk_, ++c) {
      const std::size_t len = std::min<std::size_t>(chunk_, n - first);
      float lo, hi;
      std::memcpy(&lo, scales + c * 8, 4);
      std::memcpy(&hi, scales + c * 8 + 4, 4);
      const double step = (static_cast<double>(hi) - lo) / levels_;
      float* chunk_out = out.data() + first;
      for (std::size_t i = 0, k = keep(len); i < k; ++i) {
        const std::uint32_t index = stream.get(index_bits_);
        const std::uint32_t value = stream.get(bits_);
        float v = static_cast<float>(lo + step * (value & magnitude_mask));
        v = (value >> (bits_ - 1)) != 0 ? -v : v;
        if (accumulate) chunk_out[index] += weight * v;
        else chunk_out[index] = v;
      }
    }
    return DecodeError::kOk;
  }

 private:
  double ratio_;
  std::uint32_t chunk_;
  unsigned bits_;
  unsigned index_bits_;
  std::uint32_t levels_;
  bool stochastic_;
};

}  // namespace

std::unique_ptr<Codec> make_chunk_topk_codec(const CodecConfig& c) {
  return std::make_unique<ChunkTopkCodec>(c.topk_ratio, c.block, c.value_bits, c.stochastic_rounding);
}

}  // namespace diloco::compression::detail
