// IEEE half precision to fp32, exactly (F16C where the CPU has it): the
// conversion the fp16 codec decodes with, for other readers of fp16 data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace diloco::compression {

void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace diloco::compression
