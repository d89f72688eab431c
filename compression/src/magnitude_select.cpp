// Entries at or above a magnitude, branch-free, with an AVX2 path.
#include "magnitude_select.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace diloco::compression::detail {
namespace {

// Entries [first, last) whose magnitude bits are at least `low`, appended at
// `end` (room for last - first more). Returns the new end. Written every
// time, kept only when it qualifies: no branch to mispredict.
std::size_t collect_plain(const float* x, std::size_t first, std::size_t last, std::uint32_t low,
                          std::uint32_t* index, float* value, std::size_t end) {
  for (std::size_t e = first; e < last; ++e) {
    index[end] = static_cast<std::uint32_t>(e);
    value[end] = x[e];
    end += magnitude_bits(x[e]) >= low ? 1 : 0;
  }
  return end;
}

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
// The same, 8 entries per step: compare, then pack the qualifying lanes to
// the front with one permutation from a table indexed by the lane mask.
struct PackTable {
  alignas(32) std::uint32_t lanes[256][8];
  PackTable() {
    for (int m = 0; m < 256; ++m) {
      int j = 0;
      for (int b = 0; b < 8; ++b)
        if (m & (1 << b)) lanes[m][j++] = static_cast<std::uint32_t>(b);
      for (; j < 8; ++j) lanes[m][j] = 0;
    }
  }
};

__attribute__((target("avx2,popcnt"))) std::size_t collect_avx2(const float* x, std::size_t first,
                                                                 std::size_t last, std::uint32_t low,
                                                                 std::uint32_t* index, float* value,
                                                                 std::size_t end) {
  static const PackTable table;
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  // Magnitude bits fit in 31 bits, so a signed compare against low - 1 orders them.
  const __m256i below = _mm256_set1_epi32(static_cast<int>(low) - 1);
  const __m256i step = _mm256_set1_epi32(8);
  __m256i ids = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                 _mm256_set1_epi32(static_cast<int>(first)));
  std::size_t e = first;
  for (; e + 8 <= last; e += 8) {
    const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + e));
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_and_si256(v, magnitude), below);
    const unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(keep)));
    const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(table.lanes[mask]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(index + end), _mm256_permutevar8x32_epi32(ids, order));
    _mm256_storeu_ps(value + end, _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(v, order)));
    end += static_cast<std::size_t>(__builtin_popcount(mask));
    ids = _mm256_add_epi32(ids, step);
  }
  return collect_plain(x, e, last, low, index, value, end);
}
#endif

}  // namespace

std::size_t collect_at_least(const float* x, std::size_t first, std::size_t last, std::uint32_t low,
                             std::uint32_t* index, float* value, std::size_t end) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return collect_avx2(x, first, last, low, index, value, end);
#endif
  return collect_plain(x, first, last, low, index, value, end);
}

}  // namespace diloco::compression::detail
