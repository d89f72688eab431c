// CRC32C: the SSE4.2 instruction where the CPU has it (checked once at run
// time), three independent streams at a time, else slicing-by-8 over tables
// built at compile time.
#include "diloco/compression/crc32c.h"

#include <array>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace diloco::compression {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // reflected Castagnoli

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  return t;
}

constexpr Tables kTables = make_tables();

// Arithmetic on CRC registers as polynomials over GF(2) modulo the CRC's
// polynomial (bit 31 is x^0, as in the reflected register): appending n zero
// bytes to a message multiplies its register by x^(8n). This is how
// separately computed CRCs of adjacent blocks combine (zlib's crc32_combine).
constexpr std::uint32_t multiply(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolynomial : b >> 1;
  }
  return product;
}

// x^(8n) modulo the polynomial, by repeated squaring.
constexpr std::uint32_t x_to_8n(std::size_t n) {
  std::uint32_t result = 1u << 31;  // x^0
  std::uint32_t power = 1u << 23;   // x^8
  for (; n != 0; n >>= 1) {
    if (n & 1) result = multiply(power, result);
    power = multiply(power, power);
  }
  return result;
}

// Appending n zero bytes as four table lookups (the operation is linear, so
// it is the XOR of its effect on each byte of the register).
using ShiftTable = std::array<std::array<std::uint32_t, 256>, 4>;

constexpr ShiftTable make_shift(std::size_t n) {
  ShiftTable t{};
  const std::uint32_t op = x_to_8n(n);
  for (std::uint32_t i = 0; i < 256; ++i)
    for (int j = 0; j < 4; ++j) t[j][i] = multiply(op, i << (8 * j));
  return t;
}

std::uint32_t shift(const ShiftTable& t, std::uint32_t crc) {
  return t[0][crc & 0xFFu] ^ t[1][(crc >> 8) & 0xFFu] ^ t[2][(crc >> 16) & 0xFFu] ^ t[3][crc >> 24];
}

// Block lengths of the three-stream loops: long blocks for the bulk, short
// ones for what is left.
constexpr std::size_t kLong = 8192;
constexpr std::size_t kShort = 256;
constexpr ShiftTable kShiftLong = make_shift(kLong);
constexpr ShiftTable kShiftShort = make_shift(kShort);


#if defined(__x86_64__)
// Three streams of `block` bytes at p, p + block, p + 2 * block, combined.
__attribute__((target("sse4.2"))) std::uint64_t crc32c_three(const unsigned char* p, std::size_t block,
                                                             const ShiftTable& shift_block, std::uint64_t c0) {
  std::uint64_t c1 = 0;
  std::uint64_t c2 = 0;
  for (std::size_t i = 0; i < block; i += 8) {
    std::uint64_t w0, w1, w2;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p + block + i, 8);
    std::memcpy(&w2, p + 2 * block + i, 8);
    c0 = _mm_crc32_u64(c0, w0);
    c1 = _mm_crc32_u64(c1, w1);
    c2 = _mm_crc32_u64(c2, w2);
  }
  c0 = shift(shift_block, static_cast<std::uint32_t>(c0)) ^ c1;
  return shift(shift_block, static_cast<std::uint32_t>(c0)) ^ c2;
}

// SSE4.2's crc32 instruction computes CRC32C directly, 8 bytes per step. It
// takes 3 cycles and can start one per cycle: one chain of them runs at a
// third of the speed three independent chains do.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_hw(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
    crc = _mm_crc32_u8(crc, *p++);
    --n;
  }
  std::uint64_t c = crc;
  for (; n >= 3 * kLong; p += 3 * kLong, n -= 3 * kLong) c = crc32c_three(p, kLong, kShiftLong, c);
  for (; n >= 3 * kShort; p += 3 * kShort, n -= 3 * kShort) c = crc32c_three(p, kShort, kShiftShort, c);
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  crc = static_cast<std::uint32_t>(c);
  while (n-- > 0) crc = _mm_crc32_u8(crc, *p++);
  return crc;
}

bool has_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) {
#if defined(__x86_64__)
  if (has_sse42()) return ~crc32c_hw(reinterpret_cast<const unsigned char*>(data.data()), data.size(), ~crc);
#endif
  return crc32c_portable(data, crc);
}

std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc) {
  crc = ~crc;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  while (n >= 8) {
    std::uint32_t lo;
    std::uint32_t hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;  // little-endian hosts only, checked in wire_format.cpp
    crc = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
          kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = kTables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

}  // namespace diloco::compression
