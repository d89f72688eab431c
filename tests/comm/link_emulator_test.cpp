// The link emulation: pairs take the slower member, concurrent flows share
// each site's uplink and downlink, schedules change links by round.
#include <gtest/gtest.h>

#include "comm/link_emulator.h"

using namespace diloco::comm;

TEST(LinkEmulatorTest, PairTakesTheLargerLatencyAndSmallerBandwidth) {
  LinkEmulator links({{5.0, 200.0}, {30.0, 50.0}, {80.0, 0.0}}, {});
  // 1 MB over 50 Mbit/s (6.25 MB/s) plus 30 ms.
  EXPECT_NEAR(links.transfer_seconds(0, 1, 1000000), 0.030 + 0.16, 1e-9);
  EXPECT_NEAR(links.transfer_seconds(1, 0, 1000000), 0.030 + 0.16, 1e-9);
  // Site 2 has unlimited bandwidth: the pair is limited by site 0's 200 Mbit/s.
  EXPECT_NEAR(links.transfer_seconds(0, 2, 1000000), 0.080 + 0.04, 1e-9);
  EXPECT_NEAR(links.transfer_seconds(0, 1, 0), 0.030, 1e-12);
}

TEST(LinkEmulatorTest, ScheduleAppliesFromItsRoundAndCanRecover) {
  LinkEmulator links({{10.0, 100.0}, {10.0, 100.0}},
                     {{20, 1, {10.0, 10.0}}, {40, 1, {10.0, 100.0}}});
  links.set_round(19);
  EXPECT_DOUBLE_EQ(links.link(1).bandwidth_mbps, 100.0);
  links.set_round(20);
  EXPECT_DOUBLE_EQ(links.link(1).bandwidth_mbps, 10.0);
  links.set_round(39);
  EXPECT_DOUBLE_EQ(links.link(1).bandwidth_mbps, 10.0);
  links.set_round(40);
  EXPECT_DOUBLE_EQ(links.link(1).bandwidth_mbps, 100.0);
  links.set_round(25);  // going back (a resume) recomputes from the start
  EXPECT_DOUBLE_EQ(links.link(1).bandwidth_mbps, 10.0);
}

TEST(LinkEmulatorTest, ChangeForAMissingSiteIsRefused) {
  EXPECT_THROW(LinkEmulator({{1.0, 1.0}}, {{2, 3, {1.0, 1.0}}}), std::invalid_argument);
}

// Each site has its own uplink and downlink: an all-gather's flows share
// them, so the 10 Mbit/s site's three copies of its payload queue on its
// uplink (3 MB at 1.25 MB/s), not one payload on the slowest pair.
TEST(LinkEmulatorTest, FlowsShareEachSitesUplinkAndDownlink) {
  LinkEmulator links({{5.0, 100.0}, {5.0, 50.0}, {5.0, 20.0}, {5.0, 10.0}}, {});
  std::vector<Flow> gather;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (a != b) gather.push_back({a, b, 1e6});
  EXPECT_NEAR(links.flows_seconds(gather), 0.005 + 3e6 / 1.25e6, 1e-6);
  // Two flows out of site 0 (100 Mbit/s) to sites 1 and 2: site 2's
  // downlink holds its flow to 20 Mbit/s, site 0's other flow takes the
  // rest of the uplink (80 > 50: site 1's 50), max-min fair.
  EXPECT_NEAR(links.flows_seconds({{0, 1, 1e6}, {0, 2, 1e6}}), 0.005 + 1e6 / 2.5e6, 1e-6);
  // Two flows into site 3's 10 Mbit/s downlink share it; when one ends the
  // other has it alone.
  EXPECT_NEAR(links.flows_seconds({{0, 3, 1e6}, {1, 3, 2e6}}), 0.005 + 3e6 / 1.25e6, 1e-6);
  // Each flow arrives its own latency after its last byte.
  LinkEmulator far({{80.0, 100.0}, {0.0, 100.0}, {0.0, 10.0}}, {});
  EXPECT_NEAR(far.flows_seconds({{0, 1, 0.0}, {1, 2, 1e6}}), 0.8, 1e-6);
  EXPECT_NEAR(far.flows_seconds({}), 0.0, 1e-12);
  EXPECT_THROW(far.flows_seconds({{0, 3, 1.0}}), std::invalid_argument);
}
