// Inputs and payload edits shared by the codec tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "diloco/compression/crc32c.h"
#include "diloco/compression/wire_format.h"

namespace diloco::compression::testing {

// n values drawn from N(0, scale) by a generator seeded with `seed`.
inline std::vector<float> normal(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rewrites the checksum after a deliberate body edit, so the decoder's deeper
// checks (not the CRC) must catch it.
inline void reseal(std::vector<std::byte>& payload) {
  const auto body = std::span<const std::byte>(payload).subspan(kWireHeaderSize);
  const std::uint32_t crc = crc32c(body);
  std::memcpy(payload.data() + 28, &crc, 4);
}

}  // namespace diloco::compression::testing
