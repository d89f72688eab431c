// The pseudo-gradient of a round: how far a site moved from the global params.
#pragma once

#include <span>

namespace diloco::outer {

// delta = global - local (DiLoCo's outer gradient, before averaging).
inline void compute_pseudo_gradient(std::span<const float> global, std::span<const float> local,
                                    std::span<float> delta) {
  const std::size_t n = delta.size();
  for (std::size_t i = 0; i < n; ++i) delta[i] = global[i] - local[i];
}

}  // namespace diloco::outer
