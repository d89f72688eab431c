// Top-k sparsification: keep the k = ceil(ratio * n) largest-magnitude entries
// (ties to the lower index, so the choice is deterministic). Body:
// [k as u64][k index gaps as LEB128 varints][values: fp16, or int8 blockwise].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "codec_util.h"
#include "diloco/compression/crc32c.h"
#include "diloco/compression/codec.h"

namespace diloco::compression::detail {
namespace {

// |x| as bits: for finite floats, integer order is magnitude order.
inline std::uint32_t magnitude_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }

// The k largest |values| (ties to the lower index) as (index, value) pairs in
// increasing index order: exactly what sorting by (|x| descending, index
// ascending) and taking k gives, found by a radix select on the magnitude
// bits instead of a comparison sort, in two passes over the values. Pass 1
// counts the top 12 bits (4096 bins; four interleaved histograms, so repeats
// of a bin do not wait on each other) to find the bin holding the k-th
// largest. Pass 2 keeps every entry of a higher bin, without branches, and
// sets the threshold bin's entries aside (a few percent of n); the exact
// threshold is selected among those, and the two index-ordered lists merge.
// The histogram also finds NaN and infinity (their magnitude bits lie above
// every finite value's), so the framing's separate finiteness pass is not
// needed: `finite` is false then.
struct Kept {
  std::vector<std::uint32_t> index;
  std::vector<float> value;
  bool finite = true;
};

Kept top_k(std::span<const float> values, std::size_t k) {
  const std::size_t n = values.size();
  Kept out;
  if (k == 0) return out;
  constexpr int kShift = 19;
  constexpr std::size_t kBins = std::size_t{1} << (31 - kShift);
  std::vector<std::uint32_t> counts(4 * kBins, 0);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (std::size_t j = 0; j < 4; ++j) ++counts[j * kBins + (magnitude_bits(values[i + j]) >> kShift)];
  for (; i < n; ++i) ++counts[magnitude_bits(values[i]) >> kShift];
  for (std::size_t b = 0x7F800000u >> kShift; b < kBins; ++b)
    if (counts[b] + counts[kBins + b] + counts[2 * kBins + b] + counts[3 * kBins + b] != 0) {
      out.finite = false;
      return out;
    }
  std::size_t above = 0;  // entries in bins above the threshold bin
  std::size_t in_bin = 0;
  std::uint32_t bin = kBins - 1;
  for (;; --bin) {
    in_bin = counts[bin] + counts[kBins + bin] + counts[2 * kBins + bin] + counts[3 * kBins + bin];
    if (above + in_bin >= k) break;
    above += in_bin;
  }

  // Every entry is written to both lists, and each list's end moves on only
  // for its own: no branches, no reallocation (the sizes are known).
  std::vector<std::uint32_t> high_index(above + 1), mid_index(in_bin + 1);
  std::vector<float> high_value(above + 1), mid_value(in_bin + 1);
  std::uint32_t* hi = high_index.data();
  float* hv = high_value.data();
  std::uint32_t* mi = mid_index.data();
  float* mv = mid_value.data();
  std::size_t high_end = 0;
  std::size_t mid_end = 0;
  const float* x = values.data();
  for (std::uint32_t e = 0; e < n; ++e) {
    const float v = x[e];
    const std::uint32_t b = magnitude_bits(v) >> kShift;
    hi[high_end] = e;
    hv[high_end] = v;
    mi[mid_end] = e;
    mv[mid_end] = v;
    high_end += b > bin ? 1 : 0;
    mid_end += b == bin ? 1 : 0;
  }
  mid_index.resize(in_bin);
  mid_value.resize(in_bin);

  // Among the threshold bin: the (k - above) largest, ties to the lower index.
  const std::size_t want = k - above;
  std::vector<std::uint32_t> mags(mid_value.size());
  for (std::size_t m = 0; m < mags.size(); ++m) mags[m] = magnitude_bits(mid_value[m]);
  std::nth_element(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(want - 1), mags.end(), std::greater<>());
  const std::uint32_t threshold = mags[want - 1];
  std::size_t ties = 1;  // entries equal to the threshold that make the cut
  for (std::size_t m = 0; m + 1 < want; ++m) ties += mags[m] == threshold;

  out.index.reserve(k);
  out.value.reserve(k);
  std::size_t h = 0;
  for (std::size_t m = 0; m < mid_index.size(); ++m) {
    const std::uint32_t mag = magnitude_bits(mid_value[m]);
    if (mag < threshold || (mag == threshold && ties == 0)) continue;
    if (mag == threshold) --ties;
    for (; h < above && high_index[h] < mid_index[m]; ++h) {
      out.index.push_back(high_index[h]);
      out.value.push_back(high_value[h]);
    }
    out.index.push_back(mid_index[m]);
    out.value.push_back(mid_value[m]);
  }
  for (; h < above; ++h) {
    out.index.push_back(high_index[h]);
    out.value.push_back(high_value[h]);
  }
  return out;
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
    const Kept top = top_k(values, k);
    if (!top.finite) return kNonFinite;
    const std::vector<std::uint32_t>& idx = top.index;
    const std::vector<float>& kept = top.value;

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
      std::vector<std::uint16_t> halves(k);
      floats_to_halves(kept.data(), halves.data(), k);
      if (k > 0) std::memcpy(body.data() + pos, halves.data(), k * 2);
      pos += k * 2;
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
