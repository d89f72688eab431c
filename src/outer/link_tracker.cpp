// Passive link estimates from exchange timings: lowest recent latency, median
// recent bandwidth.
#include "outer/link_tracker.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace diloco::outer {
namespace {

void push(std::deque<double>& window, double value, std::size_t size) {
  window.push_back(value);
  while (window.size() > size) window.pop_front();
}

}  // namespace

void LinkTracker::observe_latency(double seconds) {
  if (std::isfinite(seconds) && seconds > 0.0) push(latency_, seconds, kLatencyWindow);
}

double LinkTracker::latency() const { return *std::min_element(latency_.begin(), latency_.end()); }

void LinkTracker::observe_transfer(std::size_t bytes, int messages, double seconds) {
  if (latency_.empty() || bytes == 0 || !std::isfinite(seconds)) return;
  const double streaming = seconds - messages * latency();
  // Below a tenth of the total the bandwidth term is lost in latency noise.
  if (streaming <= 0.1 * seconds) return;
  push(inverse_bandwidth_, streaming / static_cast<double>(bytes), kBandwidthWindow);
}

void LinkTracker::seed(const comm::LinkEstimate& estimate) {
  latency_.clear();
  inverse_bandwidth_.clear();
  probed_ = true;
  if (estimate.latency_s > 0.0) latency_.push_back(estimate.latency_s);
  if (estimate.bandwidth_bytes_per_s > 0.0) inverse_bandwidth_.push_back(1.0 / estimate.bandwidth_bytes_per_s);
}

comm::LinkEstimate LinkTracker::estimate() const {
  if (!known()) return {0.0, 0.0};
  std::vector<double> sorted(inverse_bandwidth_.begin(), inverse_bandwidth_.end());
  std::sort(sorted.begin(), sorted.end());
  // The lower median of an even window: the faster of the middle two.
  const double inverse = sorted[(sorted.size() - 1) / 2];
  return {latency(), inverse > 0.0 ? 1.0 / inverse : 0.0};
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
