// Passive link estimates from exchange timings.
#include "outer/link_tracker.h"

#include <algorithm>
#include <cmath>

namespace diloco::outer {

void LinkTracker::observe_latency(double seconds) {
  if (std::isfinite(seconds) && seconds >= 0.0) alpha_.add(seconds);
}

void LinkTracker::observe_transfer(std::size_t bytes, int messages, double seconds) {
  if (alpha_.empty() || bytes == 0 || !std::isfinite(seconds)) return;
  const double streaming = seconds - messages * alpha_.value();
  // Below a tenth of the total the bandwidth term is lost in latency noise.
  if (streaming <= 0.1 * seconds) return;
  inverse_beta_.add(streaming / static_cast<double>(bytes));
}

void LinkTracker::seed(const comm::LinkEstimate& estimate) {
  alpha_ = Ema(weight_);
  inverse_beta_ = Ema(weight_);
  alpha_.add(estimate.latency_s);
  if (estimate.bandwidth_bytes_per_s > 0.0) inverse_beta_.add(1.0 / estimate.bandwidth_bytes_per_s);
}

comm::LinkEstimate LinkTracker::estimate() const {
  const double inverse = inverse_beta_.value();
  return {alpha_.value(), inverse > 0.0 ? 1.0 / inverse : 0.0};
}

comm::LinkEstimate bottleneck(const std::vector<std::vector<comm::LinkEstimate>>& matrix) {
  comm::LinkEstimate worst{0.0, 0.0};
  for (std::size_t a = 0; a < matrix.size(); ++a)
    for (std::size_t b = 0; b < matrix[a].size(); ++b) {
      if (a == b) continue;
      const auto& l = matrix[a][b];
      worst.latency_s = std::max(worst.latency_s, l.latency_s);
      if (l.bandwidth_bytes_per_s > 0.0 &&
          (worst.bandwidth_bytes_per_s == 0.0 || l.bandwidth_bytes_per_s < worst.bandwidth_bytes_per_s))
        worst.bandwidth_bytes_per_s = l.bandwidth_bytes_per_s;
    }
  return worst;
}

}  // namespace diloco::outer
