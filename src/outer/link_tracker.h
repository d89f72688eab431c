// Passive estimate of the exchange's link, t(S) = alpha + S / beta, kept fresh
// from the traffic training sends anyway. A collective finishes at the pace of
// its slowest pair, so what the exchange measures is its bottleneck link.
//
// Every timing a rank takes of a transfer is the link's time plus delays that
// are not the link (the peer still encoding, the rank descheduled on a busy
// machine, a sleep that overshoots); those only ever add. So the estimator
// takes the lowest recent latency sample (as ping's minimum round trip does)
// and the median of recent bandwidth samples: one-sided noise then biases
// neither, where a moving average of raw samples rose 50-90% on a loaded
// 2-core machine. Latency samples come from tiny gathers (the exchange's
// weight agreement and the report that follows it), bandwidth samples from the
// payload bytes on the exchange's critical path over the transfer time less
// alpha per message. A probe (at start or every sync.reprobe_every rounds)
// replaces the history with its slowest pair.
#pragma once

#include <cstddef>
#include <deque>

#include "comm/link_probe.h"

namespace diloco::outer {

class LinkTracker {
 public:
  // How many recent samples each estimate looks at. A latency rise shows
  // once the lower samples have left the window (kLatencyWindow samples, two
  // per round); a bandwidth change once most of kBandwidthWindow have (two
  // rounds).
  static constexpr std::size_t kLatencyWindow = 8;
  static constexpr std::size_t kBandwidthWindow = 3;

  // A small message's one-way time.
  void observe_latency(double seconds);
  // `messages` messages in sequence carried `bytes` on the critical path in
  // `seconds`. Ignored until a latency is known, or when latency explains
  // nearly all of it (the bandwidth term would be lost in its noise).
  void observe_transfer(std::size_t bytes, int messages, double seconds);
  // Starts over from a probed estimate.
  void seed(const comm::LinkEstimate& estimate);

  // The lowest of one sample filters nothing (the first exchange also pays
  // for MPI's connection set-up): a passive estimate needs two; a probe,
  // itself the fastest of many round trips, counts as known at once.
  bool known() const { return (latency_.size() >= 2 || probed_) && !inverse_bandwidth_.empty(); }
  comm::LinkEstimate estimate() const;

 private:
  double latency() const;
  std::deque<double> latency_;            // seconds
  // Seconds per byte, not bytes per second: times add up, and the median of
  // an odd window is one of the samples either way.
  std::deque<double> inverse_bandwidth_;
  bool probed_ = false;
};

// The slowest pair of a probed matrix: largest latency, smallest bandwidth.
comm::LinkEstimate bottleneck(const std::vector<std::vector<comm::LinkEstimate>>& matrix);

}  // namespace diloco::outer
