// The passive link estimator on synthetic timings: what a rank measures is the
// link plus delays that are not the link (one-sided), as on a loaded machine.
#include "outer/link_tracker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace diloco::outer {
namespace {

constexpr double kLatency = 0.010;            // 10 ms
constexpr double kBandwidth = 20e6 / 8.0;     // 20 Mbit/s in bytes/s
constexpr std::size_t kPayload = 480 * 1024;  // one fp32 payload of ~120k params

// One round as the trainer feeds it: two tiny gathers, one payload transfer.
// Every timing carries extra delay, never less than the link's time: usually
// a little, in a third of the samples ~9 ms more (the rank descheduled on a
// busy 2-core machine; a moving average then read 14-19 ms for 10 ms).
struct NoisyLink {
  double latency = kLatency;
  double bandwidth = kBandwidth;
  std::mt19937_64 rng{7};
  double extra() {
    std::exponential_distribution<double> small(1.0 / 0.0015);
    std::bernoulli_distribution spike(0.3);
    return small(rng) + (spike(rng) ? 0.009 : 0.0);
  }
  void round(LinkTracker& t) {
    t.observe_latency(latency + extra());
    t.observe_latency(latency + extra());
    t.observe_transfer(kPayload, 1, latency + kPayload / bandwidth + extra());
  }
};

TEST(LinkTrackerTest, UnbiasedUnderOneSidedNoise) {
  LinkTracker tracker;
  NoisyLink link;
  double worst_latency = 0.0, worst_bandwidth = 0.0;
  for (int r = 0; r < 40; ++r) {
    link.round(tracker);
    ASSERT_TRUE(tracker.known());
    const auto e = tracker.estimate();
    worst_latency = std::max(worst_latency, std::abs(e.latency_s / kLatency - 1));
    worst_bandwidth = std::max(worst_bandwidth, std::abs(e.bandwidth_bytes_per_s / kBandwidth - 1));
  }
  EXPECT_LE(worst_latency, 0.20);
  EXPECT_LE(worst_bandwidth, 0.15);
}

TEST(LinkTrackerTest, FollowsABandwidthDropWithinTwoRounds) {
  LinkTracker tracker;
  NoisyLink link;
  for (int r = 0; r < 6; ++r) link.round(tracker);
  link.bandwidth = kBandwidth / 10;
  link.round(tracker);
  link.round(tracker);
  EXPECT_NEAR(tracker.estimate().bandwidth_bytes_per_s / (kBandwidth / 10), 1.0, 0.15);
  link.bandwidth = kBandwidth;
  link.round(tracker);
  link.round(tracker);
  EXPECT_NEAR(tracker.estimate().bandwidth_bytes_per_s / kBandwidth, 1.0, 0.15);
}

TEST(LinkTrackerTest, FollowsALatencyChange) {
  LinkTracker tracker;
  NoisyLink link;
  for (int r = 0; r < 6; ++r) link.round(tracker);
  link.latency = 0.050;
  for (std::size_t r = 0; r < LinkTracker::kLatencyWindow / 2; ++r) link.round(tracker);
  EXPECT_NEAR(tracker.estimate().latency_s / 0.050, 1.0, 0.20);
  link.latency = 0.005;
  link.round(tracker);
  EXPECT_NEAR(tracker.estimate().latency_s / 0.005, 1.0, 0.20);
}

TEST(LinkTrackerTest, ProbeReplacesHistory) {
  LinkTracker tracker;
  NoisyLink link;
  for (int r = 0; r < 4; ++r) link.round(tracker);
  tracker.seed({0.080, 1e6});
  EXPECT_DOUBLE_EQ(tracker.estimate().latency_s, 0.080);
  EXPECT_DOUBLE_EQ(tracker.estimate().bandwidth_bytes_per_s, 1e6);
}

TEST(LinkTrackerTest, IgnoresWhatCannotBeASample) {
  LinkTracker tracker;
  tracker.observe_transfer(kPayload, 1, 0.2);  // no latency yet
  EXPECT_FALSE(tracker.known());
  tracker.observe_latency(std::nan(""));
  tracker.observe_latency(0.0);
  tracker.observe_latency(kLatency);
  tracker.observe_transfer(kPayload, 1, kLatency * 1.05);  // latency explains it all
  tracker.observe_transfer(kPayload, 1, kLatency + kPayload / kBandwidth);
  EXPECT_FALSE(tracker.known()) << "one latency sample is not an estimate";
  tracker.observe_latency(kLatency);
  ASSERT_TRUE(tracker.known());
  EXPECT_NEAR(tracker.estimate().bandwidth_bytes_per_s, kBandwidth, 1.0);
}

}  // namespace
}  // namespace diloco::outer
