// The overhead schedule: the H formula, bias-corrected estimates, hysteresis.
#include <gtest/gtest.h>

#include <cmath>

#include "outer/scheduler.h"

using namespace diloco::outer;

TEST(EmaTest, BiasCorrectionMakesTheFirstValueExact) {
  Ema e(0.1);
  e.add(4.0);
  EXPECT_DOUBLE_EQ(e.value(), 4.0);
  e.add(4.0);
  EXPECT_NEAR(e.value(), 4.0, 1e-12);
  Ema f(0.5);
  f.add(2.0);
  f.add(4.0);  // raw 0.5*4 + 0.25*2 = 2.5, corrected / 0.75
  EXPECT_NEAR(f.value(), 2.5 / 0.75, 1e-12);
}

TEST(SchedulerTest, FixedModeKeepsH) {
  ScheduleConfig c;
  Scheduler s(c, 50);
  s.observe(0.01, 10.0);
  EXPECT_EQ(s.advance().H, 50);
}

TEST(SchedulerTest, OverheadPicksTheSmallestHMeetingTheTarget) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kOverhead;
  c.target_comm_share = 0.05;
  c.hysteresis = 0.0;
  Scheduler s(c, 10);
  s.observe(0.1, 1.0);  // step 0.1 s, sync 1 s: H >= 1 * 0.95 / (0.05 * 0.1) = 190
  const Plan p = s.advance();
  EXPECT_EQ(p.H, 190);
  EXPECT_NEAR(p.predicted_share, 1.0 / (190 * 0.1 + 1.0), 1e-12);
  EXPECT_LE(p.predicted_share, 0.05);
}

TEST(SchedulerTest, ClampsToTheConfiguredRange) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kOverhead;
  c.h_min = 20;
  c.h_max = 100;
  c.hysteresis = 0.0;
  Scheduler slow(c, 50);
  slow.observe(0.001, 100.0);
  EXPECT_EQ(slow.advance().H, 100);
  Scheduler fast(c, 50);
  fast.observe(1.0, 0.0001);
  EXPECT_EQ(fast.advance().H, 20);
}

TEST(SchedulerTest, HysteresisIgnoresSmallChangesButFollowsLargeOnes) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kOverhead;
  c.target_comm_share = 0.1;
  c.hysteresis = 0.2;
  c.ema = 1.0;  // newest measurement only, to see the rule itself
  Scheduler s(c, 90);
  s.observe(0.1, 1.0);  // ideal 90
  EXPECT_EQ(s.advance().H, 90);
  s.observe(0.1, 1.04);  // ideal 94; H 90 gives share 0.1036, within 5% of target
  EXPECT_EQ(s.advance().H, 90);
  s.observe(0.1, 0.95);  // ideal 86: 4% lower, inside the band
  EXPECT_EQ(s.advance().H, 90);
  s.observe(0.1, 1.2);  // ideal 108: H 90 would give share 0.118, raise at once
  EXPECT_EQ(s.advance().H, 108);
  s.observe(0.1, 10.0);  // link 10x slower: ideal 900
  EXPECT_EQ(s.advance().H, 900);
  s.observe(0.1, 1.0);  // recovered: back down
  EXPECT_EQ(s.advance().H, 90);
}

TEST(SchedulerTest, StateRoundTrips) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kOverhead;
  Scheduler a(c, 10);
  a.observe(0.2, 3.0);
  a.advance();
  Scheduler b(c, 1);
  b.load(a.state());
  EXPECT_EQ(b.current_H(), a.current_H());
  EXPECT_EQ(b.next().H, a.next().H);
  EXPECT_THROW(b.load({1.0, 2.0}), std::invalid_argument);
}

TEST(SchedulerTest, TimeBudgetGivesSitesStepsInProportionToTheirSpeed) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kTimeBudget;
  c.target_comm_share = 0.1;
  c.hysteresis = 0.0;
  c.ema = 1.0;
  Scheduler s(c, 10);
  const double steps[] = {0.1, 0.2, 0.4};  // site 1 twice, site 2 four times slower
  s.observe(steps, 1.0);  // fastest site: H >= 1 * 0.9 / (0.1 * 0.1) = 90
  const Plan p = s.advance();
  EXPECT_EQ(p.H, 90);
  EXPECT_EQ(p.site_H, (std::vector<int>{90, 45, 23}));  // 22.5 rounds to 23
  EXPECT_EQ(s.site_H(1), 45);
  EXPECT_NEAR(p.predicted_share, 1.0 / (90 * 0.1 + 1.0), 1e-12);
}

TEST(SchedulerTest, TimeBudgetWithEqualSitesIsTheOverheadSchedule) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kTimeBudget;
  c.hysteresis = 0.0;
  Scheduler tb(c, 10);
  c.mode = ScheduleMode::kOverhead;
  Scheduler oh(c, 10);
  const double steps[] = {0.1, 0.1};
  tb.observe(steps, 1.0);
  oh.observe(steps, 1.0);
  EXPECT_EQ(tb.advance().site_H, oh.advance().site_H);
  EXPECT_EQ(tb.current_H(), oh.current_H());
}

TEST(SchedulerTest, PerSiteStateRoundTrips) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kTimeBudget;
  Scheduler a(c, 10);
  const double steps[] = {0.1, 0.3};
  a.observe(steps, 2.0);
  a.advance();
  Scheduler b(c, 1);
  b.load(a.state());
  EXPECT_EQ(b.site_H(1), a.site_H(1));
  EXPECT_EQ(b.next().site_H, a.next().site_H);
  auto broken = a.state();
  broken.pop_back();
  EXPECT_THROW(b.load(broken), std::invalid_argument);
}

TEST(SchedulerTest, OverlappedModelOnlyNeedsHToHideTheSync) {
  ScheduleConfig c;
  c.mode = ScheduleMode::kOverhead;
  c.target_comm_share = 0.1;
  c.hysteresis = 0.0;
  c.overlapped = true;
  c.ema = 1.0;
  Scheduler s(c, 10);
  s.observe(0.1, 1.0);  // exposed (1 - 0.1 H) / 1 <= 0.1 needs H >= 9
  const Plan p = s.advance();
  EXPECT_EQ(p.H, 9);
  EXPECT_NEAR(p.predicted_share, 0.1, 1e-12);
  c.overlapped = false;
  Scheduler blocking(c, 10);
  blocking.observe(0.1, 1.0);
  EXPECT_EQ(blocking.advance().H, 90);  // the blocking model needs ten times more
}
