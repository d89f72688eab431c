// The median the benchmark programs report (the upper one of an even count).
#pragma once

#include <algorithm>
#include <vector>

namespace diloco::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace diloco::bench
