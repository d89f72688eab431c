// Passive estimate of the exchange's link, t(S) = alpha + S / beta, kept fresh
// from the traffic training sends anyway. A collective finishes at the pace of
// its slowest pair, so what the exchange measures is its bottleneck link:
// alpha from the small report gather that follows every exchange (all leaders
// in step by then), beta from the payload bytes on the exchange's critical
// path over the transfer time less alpha per message. A probe (at start or
// every sync.reprobe_every rounds) replaces the history with its slowest pair.
#pragma once

#include <cstddef>

#include "comm/link_probe.h"
#include "outer/scheduler.h"

namespace diloco::outer {

class LinkTracker {
 public:
  // `weight` of the newest sample, as the scheduler's: follow a change within
  // a round or two.
  explicit LinkTracker(double weight = 0.7) : weight_(weight), alpha_(weight), inverse_beta_(weight) {}

  // A small message's one-way time.
  void observe_latency(double seconds);
  // `messages` messages in sequence carried `bytes` on the critical path in
  // `seconds`. Ignored until a latency is known, or when latency explains it all.
  void observe_transfer(std::size_t bytes, int messages, double seconds);
  // Starts over from a probed estimate.
  void seed(const comm::LinkEstimate& estimate);

  bool known() const { return !alpha_.empty() && !inverse_beta_.empty(); }
  comm::LinkEstimate estimate() const;

 private:
  double weight_;
  Ema alpha_;  // seconds
  // Seconds per byte, not bytes per second: times add up, so after a drop
  // from 20 to 2 Mbit/s the average of the inverse lands near 2 within a few
  // rounds where an average of bandwidths would linger near 11.
  Ema inverse_beta_;
};

// The slowest pair of a probed matrix: largest latency, smallest bandwidth.
comm::LinkEstimate bottleneck(const std::vector<std::vector<comm::LinkEstimate>>& matrix);

}  // namespace diloco::outer
