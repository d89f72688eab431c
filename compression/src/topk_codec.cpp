// Top-k sparsification: keep the k = ceil(ratio * n) largest-magnitude entries
// (ties to the lower index, so the choice is deterministic). Body:
// [k as u64][k index gaps as LEB128 varints][values: fp16, or int8 blockwise].
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "codec_util.h"
#include "diloco/compression/crc32c.h"
#include "diloco/compression/codec.h"
#include "magnitude_select.h"

namespace diloco::compression::detail {
namespace {

// The k largest |values| (ties to the lower index) as (index, value) pairs in
// increasing index order: exactly what sorting by (|x| descending, index
// ascending) and taking k gives, found in one pass over the values instead of
// a comparison sort. A sample (16 evenly spread runs of 4096 entries) guesses
// magnitude bits `low` above which somewhat more than k entries lie; one pass
// keeps the index and value of every entry at or above it (the candidates, in
// index order; AVX2 packs 8 entries per step where the CPU has it); if fewer
// than k made it, the pass is repeated with every entry a candidate, so the
// result never depends on the guess, only the speed does. The exact threshold
// is then found among the candidates by a radix select (a 4096-bin histogram
// of their magnitudes, then a selection inside the one bin that holds the
// k-th largest), and one branch-free pass moves the winners to the front.
// NaN and infinity have magnitude bits above every finite value's, so they
// are always candidates: top_k says so, and the framing needs no separate
// finiteness pass.

// Magnitude bits with about 1.25 k (plus a margin for the sample's noise)
// entries at or above them; 0 (everything) for small or dense selections.
std::uint32_t guess_low(std::span<const float> values, std::size_t k) {
  constexpr std::size_t kRuns = 16;
  constexpr std::size_t kRun = 4096;
  const std::size_t n = values.size();
  if (n < 16 * kRuns * kRun || 2 * k > n) return 0;
  std::vector<std::uint32_t> sample;
  sample.reserve(kRuns * kRun);
  for (std::size_t r = 0; r < kRuns; ++r) {
    const std::size_t first = (n - kRun) * r / (kRuns - 1);
    for (std::size_t i = first; i < first + kRun; ++i) sample.push_back(magnitude_bits(values[i]));
  }
  const double expected = static_cast<double>(k) * static_cast<double>(sample.size()) / static_cast<double>(n);
  const auto rank = static_cast<std::size_t>(1.25 * expected + 4.0 * std::sqrt(expected) + 8.0);
  if (rank >= sample.size()) return 0;
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(rank), sample.end(), std::greater<>());
  return sample[rank];
}

// Index and value of each candidate, then of each winner. Scratch memory
// (not zero-filled) kept by each encoding thread from one call to the next:
// fresh memory costs a page fault per 4 KB, measured at a third of the
// encoding time; it holds about 1.25 k x 8 bytes.
struct Candidates {
  Scratch<std::uint32_t> index;
  Scratch<float> value;
  std::size_t size = 0;
  std::size_t capacity = 0;

  void reserve(std::size_t n) {
    if (n <= capacity) return;
    auto more_index = make_scratch<std::uint32_t>(n);
    auto more_value = make_scratch<float>(n);
    if (size > 0) {
      std::memcpy(more_index.get(), index.get(), size * sizeof(std::uint32_t));
      std::memcpy(more_value.get(), value.get(), size * sizeof(float));
    }
    index = std::move(more_index);
    value = std::move(more_value);
    capacity = n;
  }
};

// Every entry whose magnitude bits are at least `low`, in index order;
// `expected` sizes the buffers.
void collect(std::span<const float> values, std::uint32_t low, std::size_t expected, Candidates& out) {
  constexpr std::size_t kChunk = 4096;
  const std::size_t n = values.size();
  const float* x = values.data();
  out.size = 0;
  out.reserve(std::min(n, expected) + kChunk + 8);
  for (std::size_t first = 0; first < n; first += kChunk) {
    const std::size_t last = std::min(n, first + kChunk);
    if (out.capacity < out.size + kChunk + 8) out.reserve(std::max(2 * out.capacity, out.size + kChunk + 8));
    out.size = collect_at_least(x, first, last, low, out.index.get(), out.value.get(), out.size);
  }
}

// The k-th largest magnitude among the candidates (1 <= k <= their count)
// by a radix select; none is below `low`.
struct Threshold {
  std::uint32_t bits = 0;
  std::size_t above = 0;  // candidates strictly above it
  std::size_t equal = 0;  // candidates equal to it
};
Threshold kth_largest(const Candidates& c, std::size_t k, std::uint32_t low, std::uint32_t high) {
  constexpr int kBits = 12;
  const int shift = std::max(0, static_cast<int>(std::bit_width(high - low)) - kBits);
  std::vector<std::uint32_t> counts((std::size_t{1} << kBits) + 1, 0);
  for (std::size_t i = 0; i < c.size; ++i) ++counts[(magnitude_bits(c.value[i]) - low) >> shift];
  std::size_t above = 0;
  std::size_t bin = (high - low) >> shift;
  for (;; --bin) {
    if (above + counts[bin] >= k) break;
    above += counts[bin];
  }
  std::vector<std::uint32_t> in_bin;
  in_bin.reserve(counts[bin]);
  for (std::size_t i = 0; i < c.size; ++i) {
    const std::uint32_t m = magnitude_bits(c.value[i]);
    if (((m - low) >> shift) == bin) in_bin.push_back(m);
  }
  const std::size_t want = k - above;  // 1-based rank inside the bin
  std::nth_element(in_bin.begin(), in_bin.begin() + static_cast<std::ptrdiff_t>(want - 1), in_bin.end(),
                   std::greater<>());
  Threshold t;
  t.bits = in_bin[want - 1];
  t.above = above;
  for (std::uint32_t m : in_bin) {
    t.above += m > t.bits ? 1 : 0;
    t.equal += m == t.bits ? 1 : 0;
  }
  return t;
}

// Leaves the k winners at the front of `c`, in index order; false (and `c`
// unusable) when some value is NaN or infinite.
bool top_k(std::span<const float> values, std::size_t k, Candidates& c) {
  if (k == 0) return true;
  std::uint32_t low = guess_low(values, k);
  collect(values, low, low == 0 ? values.size() : k + k / 2, c);
  if (c.size < k) {  // the sample misjudged: every entry is a candidate
    low = 0;
    collect(values, low, values.size(), c);
  }
  std::uint32_t high = 0;
  for (std::size_t i = 0; i < c.size; ++i) high = std::max(high, magnitude_bits(c.value[i]));
  if (high >= 0x7F800000u) return false;
  const Threshold t = kth_largest(c, k, low, high);
  const std::uint32_t threshold = t.bits;
  // Entries equal to the threshold that make the cut (the first ones by index).
  std::size_t ties = k - t.above;
  // In place: each winner moves to `end`, which never passes the one read.
  std::size_t end = 0;
  if (ties == t.equal) {  // every tie makes it (the usual case): no count to carry
    for (std::size_t i = 0; i < c.size; ++i) {
      c.index[end] = c.index[i];
      c.value[end] = c.value[i];
      end += magnitude_bits(c.value[i]) >= threshold ? 1 : 0;
    }
    c.size = k;
    return true;
  }
  for (std::size_t i = 0; i < c.size; ++i) {
    const std::uint32_t m = magnitude_bits(c.value[i]);
    const std::size_t tie = m == threshold ? 1 : 0;
    const std::size_t keep = (m > threshold ? 1 : 0) | (tie & (ties > 0 ? 1 : 0));
    ties -= tie & keep;
    c.index[end] = c.index[i];
    c.value[end] = c.value[i];
    end += keep;
  }
  c.size = k;
  return true;
}

class TopkCodec final : public Codec {
 public:
  TopkCodec(double ratio, std::uint32_t block, bool int8_values)
      : ratio_(ratio), block_(block), int8_(int8_values) {
    CodecConfig c;
    c.block = block;
    if (int8_) values_codec_ = make_int8_codec(c);
  }

  CodecId id() const override { return int8_ ? CodecId::kTopkInt8 : CodecId::kTopk; }
  std::string_view name() const override { return int8_ ? "topk+int8" : "topk"; }

  std::size_t keep(std::size_t n) const {
    if (n == 0) return 0;
    const auto k = static_cast<std::size_t>(std::ceil(ratio_ * static_cast<double>(n)));
    return std::clamp<std::size_t>(k, 1, n);
  }

 protected:
  bool fixed_body_size() const override { return false; }
  std::uint32_t block_size() const override { return int8_ ? block_ : 0; }
  bool checks_finite() const override { return true; }

  std::size_t values_size(std::size_t k) const {
    return int8_ ? blocks_for(k, block_) * sizeof(float) + k : k * 2;
  }

  // Upper bound (every gap a 5-byte varint); encode_body reports the real size.
  std::size_t body_size(std::size_t count) const override {
    const std::size_t k = keep(count);
    return 8 + k * 5 + values_size(k);
  }

  std::size_t encode_body(std::span<const float> values, std::span<std::byte> body, std::uint64_t seed) const override {
    const std::size_t n = values.size();
    const std::size_t k = keep(n);
    thread_local Candidates scratch;
    if (!top_k(values, k, scratch)) return kNonFinite;
    const std::uint32_t* idx = scratch.index.get();
    const std::span<const float> kept(scratch.value.get(), k);

    const std::uint64_t k64 = k;
    std::memcpy(body.data(), &k64, 8);
    std::size_t pos = 8;
    std::uint32_t prev = 0;
    for (std::size_t i = 0; i < k; ++i) {
      std::uint32_t gap = i == 0 ? idx[0] : idx[i] - prev - 1;  // strictly increasing: gaps >= 0
      prev = idx[i];
      do {
        auto byte = static_cast<unsigned char>(gap & 0x7Fu);
        gap >>= 7;
        if (gap) byte |= 0x80u;
        body[pos++] = std::byte(byte);
      } while (gap);
    }
    if (int8_) {
      std::vector<std::byte> inner;
      values_codec_->encode(kept, inner, seed);
      // The values travel without their own header: this payload's header covers them.
      std::memcpy(body.data() + pos, inner.data() + kWireHeaderSize, inner.size() - kWireHeaderSize);
      pos += inner.size() - kWireHeaderSize;
    } else {
      std::uint16_t halves[kChunk];  // converted in pieces that stay in cache
      for (std::size_t i = 0; i < k; i += kChunk) {
        const std::size_t n = std::min(kChunk, k - i);
        floats_to_halves(kept.data() + i, halves, n);
        std::memcpy(body.data() + pos, halves, n * 2);
        pos += n * 2;
      }
    }
    return pos;
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    const std::size_t n = out.size();
    if (body.size() < 8) return DecodeError::kTruncated;
    std::uint64_t k;
    std::memcpy(&k, body.data(), 8);
    if (k > n) return DecodeError::kCorruptBody;
    std::vector<std::uint32_t> idx(k);
    std::size_t pos = 8;
    std::uint64_t next = 0;  // smallest index the next entry may take
    for (std::size_t i = 0; i < k; ++i) {
      std::uint64_t gap = 0;
      for (int shift = 0;; shift += 7) {
        if (pos >= body.size()) return DecodeError::kTruncated;
        if (shift > 28) return DecodeError::kCorruptBody;
        const auto byte = static_cast<unsigned char>(body[pos++]);
        gap |= static_cast<std::uint64_t>(byte & 0x7Fu) << shift;
        if (!(byte & 0x80u)) break;
      }
      const std::uint64_t index = next + gap;
      if (index >= n) return DecodeError::kCorruptBody;
      idx[i] = static_cast<std::uint32_t>(index);
      next = index + 1;
    }
    if (body.size() - pos != values_size(k)) return DecodeError::kLengthMismatch;
    std::vector<float> kept(k);
    const auto values = body.subspan(pos);
    if (int8_) {
      // Re-wrap the values in a header so the int8 codec checks them itself.
      std::vector<std::byte> inner(kWireHeaderSize + values.size());
      std::memcpy(inner.data() + kWireHeaderSize, values.data(), values.size());
      WireHeader h;
      h.codec = static_cast<std::uint8_t>(CodecId::kInt8);
      h.element_count = k;
      h.block_size = block_;
      h.body_length = values.size();
      h.body_crc32c = crc32c(values);
      write_header(h, std::span<std::byte, kWireHeaderSize>(inner.data(), kWireHeaderSize));
      if (auto e = values_codec_->decode(inner, kept); e != DecodeError::kOk) return e;
    } else {
      std::vector<std::uint16_t> halves(k);
      if (k > 0) std::memcpy(halves.data(), values.data(), k * 2);
      halves_to_floats(halves.data(), kept.data(), k);
      for (float v : kept)
        if (!is_finite(v)) return DecodeError::kNonFiniteValue;
    }
    if (!accumulate) std::fill(out.begin(), out.end(), 0.0f);
    for (std::size_t i = 0; i < k; ++i) {
      if (accumulate) out[idx[i]] += weight * kept[i];
      else out[idx[i]] = kept[i];
    }
    return DecodeError::kOk;
  }

 private:
  double ratio_;
  std::uint32_t block_;
  bool int8_;
  std::unique_ptr<Codec> values_codec_;
};

}  // namespace

std::unique_ptr<Codec> make_topk_codec(const CodecConfig& c, bool int8_values) {
  return std::make_unique<TopkCodec>(c.topk_ratio, c.block, int8_values);
}

}  // namespace diloco::compression::detail
