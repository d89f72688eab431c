// The link model: pairs take the slower member, schedules change links by round.
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
