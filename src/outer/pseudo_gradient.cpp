// FedNova-normalized shares of the sites' pseudo-gradients.
#include "outer/pseudo_gradient.h"

#include <stdexcept>

namespace diloco::outer {

std::vector<double> normalized_shares(std::span<const double> weights, std::span<const double> steps) {
  if (weights.size() != steps.size()) throw std::invalid_argument("one step count per weight is needed");
  std::vector<double> shares(weights.size(), 0.0);
  double total = 0.0;
  bool equal_steps = true;
  double first_steps = 0.0;
  for (std::size_t s = 0; s < weights.size(); ++s) {
    if (weights[s] <= 0.0) continue;
    if (steps[s] <= 0.0) throw std::invalid_argument("a site with weight ran no steps");
    if (first_steps == 0.0) first_steps = steps[s];
    equal_steps = equal_steps && steps[s] == first_steps;
    total += weights[s];
  }
  if (total <= 0.0) return shares;
  if (equal_steps) {
    for (std::size_t s = 0; s < weights.size(); ++s) shares[s] = weights[s] / total;
    return shares;
  }
  double per_step_total = 0.0;
  for (std::size_t s = 0; s < weights.size(); ++s)
    if (weights[s] > 0.0) per_step_total += weights[s] / steps[s];
  double tau_eff = 0.0;
  for (std::size_t s = 0; s < weights.size(); ++s)
    if (weights[s] > 0.0) tau_eff += (weights[s] / steps[s] / per_step_total) * steps[s];
  for (std::size_t s = 0; s < weights.size(); ++s)
    if (weights[s] > 0.0) shares[s] = (weights[s] / steps[s] / per_step_total) * tau_eff / steps[s];
  return shares;
}

}  // namespace diloco::outer
