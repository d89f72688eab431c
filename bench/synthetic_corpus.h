// A corpus of printable pseudo-random bytes (xorshift), so the inner-step
// benchmarks need no file: the same bytes in every program and run.
#pragma once

#include <cstdint>
#include <string>

#include "inner/data/memory_tokens.h"

namespace diloco::bench {

inline inner::Dataset synthetic_corpus(std::size_t bytes) {
  std::string text(bytes, ' ');
  std::uint64_t x = 88172645463325252ull;
  for (auto& b : text) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<char>(32 + x % 95);
  }
  return inner::bytes_dataset("synthetic", text, 0.05);
}

}  // namespace diloco::bench
