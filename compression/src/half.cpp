// fp16 <-> fp32 conversion. Hardware F16C where present (checked once at run
// time), and a bit-exact software fallback (round to nearest even).
#include <cstddef>

#include "codec_util.h"
#include "diloco/compression/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define DILOCO_X86 1
#endif

namespace diloco::compression::detail {

constexpr float kHalfMax = 65504.0f;

std::uint16_t float_to_half(float f) {
  // Saturate: a pseudo-gradient entry beyond fp16's range must not become inf.
  f = f > kHalfMax ? kHalfMax : (f < -kHalfMax ? -kHalfMax : f);
  // After F. Giesen's round-to-nearest-even conversion.
  constexpr std::uint32_t kF32Inf = 255u << 23;
  constexpr std::uint32_t kF16Max = (127u + 16u) << 23;  // 65536: overflow to inf
  constexpr std::uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  std::uint32_t u = float_bits(f);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint16_t o;
  if (u >= kF16Max) {
    o = u > kF32Inf ? 0x7E00 : 0x7C00;
  } else if (u < (113u << 23)) {  // half subnormal or zero: let an FP add round
    o = static_cast<std::uint16_t>(float_bits(bits_float(u) + bits_float(kDenormMagic)) - kDenormMagic);
  } else {
    const std::uint32_t mant_odd = (u >> 13) & 1u;
    u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xFFFu;
    u += mant_odd;
    o = static_cast<std::uint16_t>(u >> 13);
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7FFFu;
  if (em >= 0x7C00u) return bits_float(sign | 0x7F800000u | ((em & 0x3FFu) << 13));
  if (em >= 0x0400u) return bits_float(sign | ((em << 13) + (112u << 23)));
  const float v = static_cast<float>(em) * 5.9604644775390625e-8f;  // em * 2^-24
  return bits_float(sign | float_bits(v));
}

namespace {

#ifdef DILOCO_X86
// Returns false when some input is NaN or infinite (checked on the way, so
// the data is read once).
__attribute__((target("avx2,f16c"))) bool to_halves_f16c(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  const __m256 hi = _mm256_set1_ps(kHalfMax);
  const __m256 lo = _mm256_set1_ps(-kHalfMax);
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  __m256i bad = _mm256_setzero_si256();
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(x), exponent), exponent));
    const __m256 v = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  bool finite = _mm256_testz_si256(bad, bad);
  for (; i < n; ++i) {
    finite = finite && is_finite(in[i]);
    out[i] = float_to_half(in[i]);
  }
  return finite;
}

__attribute__((target("avx2,f16c"))) void to_floats_f16c(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

// CPUID leaf 1: AVX (ecx 28), F16C (ecx 29), and OSXSAVE (ecx 27) with the OS
// saving the YMM registers (XCR0 bits 1 and 2). Read directly because not
// every compiler's __builtin_cpu_supports knows "f16c".
bool detect_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool avx = (c >> 28) & 1u, f16c = (c >> 29) & 1u, osxsave = (c >> 27) & 1u;
  if (!(avx && f16c && osxsave)) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u;
}

bool detect_avx2() { return __builtin_cpu_supports("avx2"); }

bool has_f16c() {
  static const bool yes = detect_f16c() && detect_avx2();
  return yes;
}
#endif

}  // namespace

bool floats_to_halves(const float* in, std::uint16_t* out, std::size_t n) {
#ifdef DILOCO_X86
  if (has_f16c()) return to_halves_f16c(in, out, n);
#endif
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    finite = finite && is_finite(in[i]);
    out[i] = float_to_half(in[i]);
  }
  return finite;
}

void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n) {
#ifdef DILOCO_X86
  if (has_f16c()) return to_floats_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

}  // namespace diloco::compression::detail

namespace diloco::compression {

void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n) { detail::halves_to_floats(in, out, n); }

}  // namespace diloco::compression
