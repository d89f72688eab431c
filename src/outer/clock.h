// Wall-clock intervals for the timings the round loop and the exchange report.
#pragma once

#include <chrono>

namespace diloco::outer {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace diloco::outer
