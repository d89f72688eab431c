// The exchange-cost model: the algorithm "auto" takes, the bytes, and the
// time on each site's own links, held against the link emulator, which
// shapes the same links message by message (max-min fair flows).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "comm/link_emulator.h"
#include "diloco/compression/codec.h"
#include "plan/model/exchange_cost.h"

using namespace diloco::plan;

namespace {

std::vector<SiteLink> sites(const std::vector<double>& mbps, double latency_ms) {
  std::vector<SiteLink> out;
  for (double m : mbps) out.push_back({latency_ms / 1e3, m * 1e6 / 8.0, m * 1e6 / 8.0});
  return out;
}

diloco::comm::LinkEmulator emulator(const std::vector<double>& mbps, const std::vector<double>& latency_ms) {
  std::vector<diloco::comm::SiteLink> links;
  for (std::size_t s = 0; s < mbps.size(); ++s) links.push_back({latency_ms[s], mbps[s]});
  return diloco::comm::LinkEmulator(links, {});
}

// The emulator's time for what the model's exchange sends: the report
// gather (a collective: every flow at once), then the payloads as the
// exchange sends them, in shifts of send_recv (comm::shifted_all_gather),
// or the ring's hops and its shifted gather of chunks. Under the emulator a
// rank holds its message for its link's time, then sends it; the send
// completes once the receiver, done holding its own, takes it.
double emulated_exchange(const diloco::comm::LinkEmulator& links, const ExchangeShape& shape, Algorithm algorithm) {
  const int n = links.sites();
  const auto gather = [&](double bytes) {
    std::vector<diloco::comm::Flow> flows;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) flows.push_back({a, b, bytes});
    return links.flows_seconds(flows);
  };
  const auto shifted = [&](double bytes) {
    std::vector<double> done(static_cast<std::size_t>(n), 0.0), held(done.size());
    for (int j = 1; j < n; ++j) {
      for (int i = 0; i < n; ++i)
        held[i] = done[i] + links.transfer_seconds(i, (i + j) % n, static_cast<std::size_t>(bytes));
      for (int i = 0; i < n; ++i) done[i] = std::max({held[i], held[(i + n - j) % n], held[(i + j) % n]});
    }
    return *std::max_element(done.begin(), done.end());
  };
  const double report = gather(kReportBytes + (shape.keyed ? kMacBytes : 0.0));
  if (algorithm == Algorithm::kAllGather)
    return report + shifted(static_cast<double>(shape.codec->payload_size(shape.values)) +
                            (shape.keyed ? kMacBytes : 0.0));
  const double chunk = static_cast<double>(shape.codec->payload_size((shape.values + n - 1) / n));
  // A hop: each site sends its chunk to the next on its own (send_recv).
  double hop = 0.0;
  for (int a = 0; a < n; ++a) hop = std::max(hop, links.transfer_seconds(a, (a + 1) % n, static_cast<std::size_t>(chunk)));
  return report + (n - 1) * hop + shifted(chunk);
}

}  // namespace

TEST(ExchangeCostTest, AllGatherSendsEveryPayloadOverEachSitesOwnUplink) {
  const auto links = sites({100.0, 50.0, 20.0, 10.0}, 5.0);
  const double p = 1e6;
  // The 10 Mbit/s site sends its payload 3 times and receives 3: 3 MB at
  // 1.25 MB/s, not the one payload on the slowest pair (0.8 s).
  EXPECT_NEAR(all_gather_seconds(links, {p, p, p, p}), 0.005 + 3.0 * p / 1.25e6, 1e-12);
  // A ring hop waits for its slowest pair, one chunk.
  EXPECT_NEAR(ring_hop_seconds(links, p), 0.005 + p / 1.25e6, 1e-12);
  // An unlimited site (0) adds no time of its own.
  EXPECT_NEAR(all_gather_seconds(sites({0.0, 0.0}, 1.0), {p, p}), 0.001, 1e-12);
  // Shifted (as the exchange sends payloads), the 10 Mbit/s site is in
  // every shift, sending one payload and taking one: 3 latencies and 3 MB
  // at 1.25 MB/s, the others finishing no later.
  EXPECT_NEAR(shifted_gather_seconds(links, {p, p, p, p}), 3 * (0.005 + p / 1.25e6), 1e-12);
  // Two sites: one shift, each way at the slower side's rate.
  EXPECT_NEAR(shifted_gather_seconds(sites({100.0, 10.0}, 5.0), {p, p}), 0.005 + p / 1.25e6, 1e-12);
}

TEST(ExchangeCostTest, AutoTakesTheRingWhenItSendsFewerBytesAndNeverWithAKey) {
  EXPECT_EQ(choose_algorithm(AlgorithmSetting::kAuto, 4, false, 1000, 250), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(AlgorithmSetting::kAuto, 2, false, 1000, 500), Algorithm::kAllGather);
  EXPECT_EQ(choose_algorithm(AlgorithmSetting::kAuto, 4, true, 1000, 250), Algorithm::kAllGather);
  // top-k: a chunk's payload is not a quarter of the whole one's.
  EXPECT_EQ(choose_algorithm(AlgorithmSetting::kAuto, 4, false, 1000, 600), Algorithm::kAllGather);
  EXPECT_EQ(choose_algorithm(AlgorithmSetting::kRing, 2, false, 1000, 500), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(AlgorithmSetting::kAllGather, 4, false, 1000, 250), Algorithm::kAllGather);
}

TEST(ExchangeCostTest, LargePayloadsGoInPartsOfOneLatencyEach) {
  const auto codec = diloco::compression::make_codec("none");
  ExchangeShape shape;
  shape.values = 5'000'000;  // 20 MB in fp32: 3 parts of at most 8 MB
  shape.codec = codec.get();
  shape.setting = AlgorithmSetting::kAllGather;
  const auto c = exchange_cost(sites({1000.0, 1000.0}, 50.0), shape);
  EXPECT_EQ(c.parts, 3);
  EXPECT_NEAR(c.seconds, 4 * 0.05 + (kReportBytes + 20e6 + 3 * 32.0) / 125e6, 1e-3);
}

// The model and the emulator must agree on an exchange's time where the
// sites' links differ; this is what lets the netsim check trust the model.
TEST(ExchangeCostTest, TheEmulatorAgreesWithTheModelForUnequalUplinks) {
  const auto codec = diloco::compression::make_codec("int8");
  std::mt19937 random(7);
  std::uniform_real_distribution<double> rate(5.0, 200.0), latency(0.0, 80.0);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 5;
    std::vector<double> mbps, lat;
    std::vector<SiteLink> model;
    for (int s = 0; s < n; ++s) {
      mbps.push_back(rate(random));
      lat.push_back(latency(random));
      model.push_back({lat.back() / 1e3, mbps.back() * 1e6 / 8.0, mbps.back() * 1e6 / 8.0});
    }
    const auto links = emulator(mbps, lat);
    for (auto setting : {AlgorithmSetting::kAllGather, AlgorithmSetting::kRing})
      for (bool keyed : {false, true}) {
        ExchangeShape shape;
        shape.values = 1'000'000;
        shape.codec = codec.get();
        shape.setting = setting;
        shape.keyed = keyed && setting == AlgorithmSetting::kAllGather;
        const auto predicted = exchange_cost(model, shape);
        const double emulated = emulated_exchange(links, shape, predicted.algorithm);
        EXPECT_NEAR(predicted.seconds / emulated, 1.0, 0.10) << "trial " << trial << ", " << n << " sites";
      }
  }
}

TEST(ExchangeCostTest, BytesCountEveryCopyAndEveryTag) {
  const auto codec = diloco::compression::make_codec("int8");
  ExchangeShape shape;
  shape.values = 100'000;
  shape.codec = codec.get();
  shape.setting = AlgorithmSetting::kAllGather;
  const double payload = static_cast<double>(codec->payload_size(100'000));
  const auto plain = exchange_cost(sites({10.0, 10.0, 10.0}, 0.0), shape);
  EXPECT_DOUBLE_EQ(plain.sent[0], 2.0 * (kReportBytes + payload));
  EXPECT_DOUBLE_EQ(plain.bytes, 3.0 * plain.sent[0]);
  shape.keyed = true;
  EXPECT_DOUBLE_EQ(exchange_cost(sites({10.0, 10.0, 10.0}, 0.0), shape).sent[0], plain.sent[0] + 2.0 * 2.0 * kMacBytes);
}
