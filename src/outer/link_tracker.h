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
  explicit LinkTracker(double weight = 0.5) : weight_(weight), alpha_(weight), beta_(weight) {}

  // A small message's one-way time.
  void observe_latency(double seconds);
  // `messages` messages in sequence carried `bytes` on the critical path in
  // `seconds`. Ignored until a latency is known, or when latency explains it all.
  void observe_transfer(std::size_t bytes, int messages, double seconds);
  // Starts over from a probed estimate.
  void seed(const comm::LinkEstimate& estimate);

  bool known() const { return !alpha_.empty() && !beta_.empty(); }
  comm::LinkEstimate estimate() const;

 private:
  double weight_;
  Ema alpha_;  // seconds
  Ema beta_;   // bytes per second
};

// The slowest pair of a probed matrix: largest latency, smallest bandwidth.
comm::LinkEstimate bottleneck(const std::vector<std::vector<comm::LinkEstimate>>& matrix);

}  // namespace diloco::outer
