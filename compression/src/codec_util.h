// Helpers shared by the codec implementations (internal to the library).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <vector>

#include "diloco/compression/wire_format.h"

// One build per CPU level of the hot loops, picked at load time (ifunc).
// ThreadSanitizer instruments the picker, which runs before TSan is up, so
// sanitizer builds take the plain version.
#if defined(__SANITIZE_THREAD__)
#define DILOCO_CLONES
#else
#define DILOCO_CLONES __attribute__((target_clones("avx2", "default")))
#endif

namespace diloco::compression::detail {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bool is_finite(float f) { return (float_bits(f) & 0x7F800000u) != 0x7F800000u; }

// SplitMix64 of (seed, index) -> uniform in [0, 1) with 24 bits: a
// counter-based generator, so rounding noise is reproducible and order-free.
inline float uniform01(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t x = seed ^ (index * 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
}

// True when no `Word` of the (possibly unaligned) body has all its exponent
// bits set: no NaN or infinity in fp32, fp16 or bf16 values. Checked before a
// decoder writes anything, so a refused payload is never partly applied.
template <class Word>
bool words_finite(const std::byte* body, std::size_t n, Word exponent_mask) {
  Word bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Word w;
    std::memcpy(&w, body + i * sizeof(Word), sizeof(Word));
    bad |= static_cast<Word>((w & exponent_mask) == exponent_mask);
  }
  return bad == 0;
}

inline std::size_t blocks_for(std::size_t count, std::size_t block) { return (count + block - 1) / block; }

// Reads scales from an unaligned body and refuses non-finite or negative ones.
inline DecodeError read_scales(std::span<const std::byte> body, std::size_t count, float* out) {
  if (count == 0) return DecodeError::kOk;
  std::memcpy(out, body.data(), count * sizeof(float));
  for (std::size_t i = 0; i < count; ++i)
    if (!is_finite(out[i]) || out[i] < 0.0f) return DecodeError::kNonFiniteScale;
  return DecodeError::kOk;
}

// The leading per-block scales of a blockwise body, checked, and where the
// packed values after them start.
inline DecodeError split_blockwise_body(std::span<const std::byte> body, std::size_t count, std::size_t block,
                                        std::vector<float>& scales, const unsigned char*& packed) {
  scales.resize(blocks_for(count, block));
  if (auto e = read_scales(body, scales.size(), scales.data()); e != DecodeError::kOk) return e;
  packed = reinterpret_cast<const unsigned char*>(body.data() + scales.size() * sizeof(float));
  return DecodeError::kOk;
}

// fp16 conversion, round to nearest even; F16C instructions when the CPU has
// them, an exact software path otherwise.
// Returns false when some input is not finite (the output is then unusable).
bool floats_to_halves(const float* in, std::uint16_t* out, std::size_t n);
void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n);
std::uint16_t float_to_half(float f);
float half_to_float(std::uint16_t h);

}  // namespace diloco::compression::detail

#include <memory>

namespace diloco::compression {
class Codec;
struct CodecConfig;
}  // namespace diloco::compression

namespace diloco::compression::detail {

// Constructors of the concrete codecs, for the registry in codec.cpp.
std::unique_ptr<Codec> make_none_codec();
std::unique_ptr<Codec> make_fp16_codec();
std::unique_ptr<Codec> make_bf16_codec();
std::unique_ptr<Codec> make_int8_codec(const CodecConfig& config);
std::unique_ptr<Codec> make_int4_codec(const CodecConfig& config);
std::unique_ptr<Codec> make_sign_codec(const CodecConfig& config);
std::unique_ptr<Codec> make_topk_codec(const CodecConfig& config, bool int8_values);
std::unique_ptr<Codec> make_chunk_topk_codec(const CodecConfig& config);

// Uninitialized memory for `n` values of a trivial type (std::vector would
// zero-fill it first, one more pass over memory).
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using Scratch = std::unique_ptr<T[], FreeDeleter>;
template <class T>
Scratch<T> make_scratch(std::size_t n) {
  void* p = std::malloc(n > 0 ? n * sizeof(T) : 1);
  if (!p) throw std::bad_alloc();
  return Scratch<T>(static_cast<T*>(p));
}

// Copies `bytes` from `src` (which the caller has just read, so it is in
// cache) to `dst` with non-temporal stores where the CPU has them: the
// destination is written without first being read into the cache, as a large
// memcpy does, instead of the read-for-ownership a cached store costs.
// Ordered before later stores by the fence in finish_streaming().
void copy_streaming(std::byte* dst, const std::byte* src, std::size_t bytes);
void finish_streaming();

// Elements decoded per chunk when a codec needs a scratch buffer.
inline constexpr std::size_t kChunk = 4096;

// out = v (accumulate false) or out += weight * v.
inline void store(float* out, const float* v, std::size_t n, bool accumulate, float weight) {
  if (!accumulate) {
    std::memcpy(out, v, n * sizeof(float));
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] += weight * v[i];
  }
}

}  // namespace diloco::compression::detail
