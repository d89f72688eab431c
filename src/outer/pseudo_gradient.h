// The pseudo-gradient of a round: how far a site moved from the global params.
#pragma once

#include <span>
#include <vector>

namespace diloco::outer {

// delta = global - local (DiLoCo's outer gradient, before averaging).
inline void compute_pseudo_gradient(std::span<const float> global, std::span<const float> local,
                                    std::span<float> delta) {
  const std::size_t n = delta.size();
  for (std::size_t i = 0; i < n; ++i) delta[i] = global[i] - local[i];
}

// Each site's share of the averaged pseudo-gradient, FedNova-style (Wang et
// al. 2020) so sites that ran different step counts do not bias the result:
// site i moved delta_i over tau_i steps on w_i tokens, so its data weight is
// p_i = (w_i / tau_i) / sum_j (w_j / tau_j), and the average is
// tau_eff * sum_i p_i delta_i / tau_i with tau_eff = sum_i p_i tau_i.
// A weight of 0 leaves a site out. When every included site ran the same
// steps this is the plain weighted average w_i / sum_j w_j, computed as such
// so it is exact, not merely equal up to rounding.
std::vector<double> normalized_shares(std::span<const double> weights, std::span<const double> steps);

}  // namespace diloco::outer
