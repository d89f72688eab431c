// Copies whose destination is not read again soon (a payload about to be
// sent): non-temporal stores on x86-64, plain memcpy elsewhere.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "codec_util.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace diloco::compression::detail {

void copy_streaming(std::byte* dst, const std::byte* src, std::size_t bytes) {
#if defined(__x86_64__)
  // Up to the first 16-byte boundary of the destination with plain stores.
  const std::size_t head = std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void finish_streaming() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace diloco::compression::detail
