// Picking entries by magnitude, shared by the top-k codecs (internal).
#pragma once

#include <cstddef>
#include <cstdint>

#include "codec_util.h"

namespace diloco::compression::detail {

// |x| as bits: for finite floats, integer order is magnitude order. NaN and
// infinity have magnitude bits above every finite value's.
inline std::uint32_t magnitude_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }

// Appends at `end` the index and value of every entry of x[first, last)
// whose magnitude bits are at least `low`, in index order, and returns the
// new end. `index` and `value` need room for last - first + 8 more entries
// (the vector path writes whole lanes past the end). Eight entries per step
// with AVX2 where the CPU has it.
std::size_t collect_at_least(const float* x, std::size_t first, std::size_t last, std::uint32_t low,
                             std::uint32_t* index, float* value, std::size_t end);

}  // namespace diloco::compression::detail
