// The planner's round model: the exchange on the sites' links, what each
// overlap mode exposes, and the plan each goal picks.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/model/round_model.h"
#include "plan/choose/goal_search.h"
#include "plan/input_error.h"
#include "diloco/compression/codec.h"

using namespace diloco::plan;

namespace {

// n sites, each link at `mbps` each way and `latency_ms`.
PlanInputs inputs(int n, double mbps, double latency_ms, std::size_t params, double step_s) {
  PlanInputs in;
  in.sites.assign(n, SiteLink{latency_ms / 1e3, mbps * 1e6 / 8.0, mbps * 1e6 / 8.0});
  in.params = params;
  in.step_s = step_s;
  in.tokens_per_step = 1024.0 * n;
  in.layers = 8;
  in.fragments = 4;
  return in;
}

// A round's report gather on the model's links (what a round adds when no
// probe measured a small collective behind an exchange).
double report(const PlanInputs& in) {
  return all_gather_seconds(in.sites, std::vector<double>(in.sites.size(), kRoundReportBytes));
}

}  // namespace

TEST(PlanModelTest, BlockingExposesTheWholeExchangeOnTheSlowestLink) {
  auto in = inputs(2, 100.0, 50.0, 1000000, 0.1);
  in.sites[1].up_bytes_per_s = in.sites[1].down_bytes_per_s = 20e6 / 8.0;  // the slow site
  const auto c = evaluate(in, "none", "none", 10);
  const double payload = static_cast<double>(diloco::compression::make_codec("none")->payload_size(1000000));
  const double gather = 0.05 + kReportBytes / 2.5e6;
  // In parts of at most 8 MB: one here (4 MB).
  EXPECT_NEAR(c.sync_s, gather + 0.05 + payload / 2.5e6, 1e-12);
  EXPECT_NEAR(c.exposed_s, c.sync_s + report(in), 1e-12);  // and the round's report gather
  EXPECT_NEAR(c.round_s, 1.0 + c.sync_s + report(in), 1e-12);
  EXPECT_NEAR(c.utilization, 1.0 / c.round_s, 1e-12);
  EXPECT_DOUBLE_EQ(c.bytes_per_round, 2.0 * (payload + kReportBytes));
  EXPECT_NEAR(c.bytes_per_billion_tokens, c.bytes_per_round / (10 * 2048.0) * 1e9, 1e-3);
}

// The probe's all-gather took 1.5x what the model gives for it: the model's
// all-gather exchanges (any codec) take 1.5x their time; the ring, which
// the probe did not run, keeps the model's.
TEST(PlanModelTest, TheProbesExchangeScalesTheModelOfItsAlgorithm) {
  auto in = inputs(4, 100.0, 0.0, 4000000, 0.1);
  const double mbps[] = {100.0, 50.0, 20.0, 10.0};
  for (int s = 0; s < 4; ++s) in.sites[s].up_bytes_per_s = in.sites[s].down_bytes_per_s = mbps[s] * 1e6 / 8.0;
  in.exchange = AlgorithmSetting::kAllGather;
  const auto plain = evaluate(in, "none", "none", 10);
  const auto plain_int8 = evaluate(in, "int8", "none", 10);
  in.probe_codec = "int4";
  in.probe_exchange_s = 1.5 * evaluate(in, "int4", "none", 10).sync_s;
  const auto m = measured_exchange(in);
  EXPECT_EQ(m.algorithm, Algorithm::kAllGather);
  EXPECT_NEAR(m.factor, 1.5, 1e-12);
  EXPECT_NEAR(evaluate(in, "none", "none", 10).sync_s, 1.5 * plain.sync_s, 1e-9);
  EXPECT_NEAR(evaluate(in, "int8", "none", 10).sync_s, 1.5 * plain_int8.sync_s, 1e-9);
  EXPECT_DOUBLE_EQ(measured_exchange_factor(in, Algorithm::kRing), 1.0);
}

// Four sites with their own uplinks: the all-gather sends every payload
// three times over each site's uplink, so the 10 Mbit/s site sets the time
// at three payloads, not one; the recipe's compression.exchange and key
// change the algorithm and the bytes.
TEST(PlanModelTest, TheExchangeFollowsTheRecipesAlgorithmAndKey) {
  auto in = inputs(4, 100.0, 0.0, 4000000, 0.1);
  const double mbps[] = {100.0, 50.0, 20.0, 10.0};
  for (int s = 0; s < 4; ++s) in.sites[s].up_bytes_per_s = in.sites[s].down_bytes_per_s = mbps[s] * 1e6 / 8.0;
  const double payload = static_cast<double>(diloco::compression::make_codec("int8")->payload_size(4000000));
  in.exchange = AlgorithmSetting::kAllGather;
  const auto gather = evaluate(in, "int8", "none", 10);
  EXPECT_FALSE(gather.ring);
  EXPECT_NEAR(gather.sync_s, 3.0 * (kReportBytes + payload) / 1.25e6, 1e-9);
  in.exchange = AlgorithmSetting::kAuto;  // the ring sends fewer bytes for 4 sites
  const auto ring = evaluate(in, "int8", "none", 10);
  EXPECT_TRUE(ring.ring);
  EXPECT_LT(ring.bytes_per_round, gather.bytes_per_round);
  in.keyed = true;  // with the key: all-gather, 32 more bytes a message
  const auto keyed = evaluate(in, "int8", "none", 10);
  EXPECT_FALSE(keyed.ring);
  EXPECT_DOUBLE_EQ(keyed.bytes_per_round, gather.bytes_per_round + 4 * 3 * 2 * kMacBytes);
}

TEST(PlanModelTest, DelayedAndStreamingHideWhatComputeCovers) {
  const auto in = inputs(2, 100.0, 50.0, 4000000, 0.1);
  const auto blocking = evaluate(in, "int8", "none", 30);
  const auto delayed = evaluate(in, "int8", "delayed", 30);
  EXPECT_NEAR(delayed.exposed_s, std::max(report(in), blocking.sync_s - 3.0), 1e-12);
  // An exchange that outlasts the steps and the report hides the report.
  ASSERT_GT(blocking.sync_s, 0.2 + report(in));
  EXPECT_NEAR(evaluate(in, "int8", "delayed", 2).exposed_s, blocking.sync_s - 0.2, 1e-12);
  const auto streaming = evaluate(in, "int8", "streaming", 20);
  EXPECT_EQ(streaming.fragments, 4);
  EXPECT_EQ(streaming.tau, 5);  // min(H / fragments, 5)
  const double one = streaming.sync_s / 4.0;
  EXPECT_NEAR(streaming.exposed_s, 4.0 * std::max(0.0, one - 0.5) + report(in), 1e-12);
  EXPECT_EQ(evaluate(in, "int8", "streaming", 8).tau, 2);
}

// Two sites that take turns being slow (as ranks sharing cores do): each
// one's mean step is 0.15 s, but every round waits for the slow one.
TEST(PlanModelTest, ARoundWaitsForTheSlowestSiteOfThatRound) {
  auto in = inputs(2, 100.0, 50.0, 1000, 0.15);
  in.site_steps.assign(2, {});
  for (int k = 0; k < 40; ++k) {
    const bool first_slow = (k / 2) % 2 == 0;  // slow for two steps, then fast for two
    in.site_steps[0].push_back(first_slow ? 0.2 : 0.1);
    in.site_steps[1].push_back(first_slow ? 0.1 : 0.2);
  }
  // H 2: windows aligned with a turn sum to 0.4 on the slow site, windows
  // across a turn 0.3 on both: the mean over 39 sliding windows.
  EXPECT_NEAR(round_compute_s(in, 2), (20 * 0.4 + 19 * 0.3) / 39.0, 1e-12);
  EXPECT_GT(round_compute_s(in, 2), 2 * 0.15);
  // H 4 covers one turn of each: 0.6 on both, H times the mean.
  EXPECT_NEAR(round_compute_s(in, 4), 0.6, 1e-12);
  EXPECT_NEAR(round_compute_s(in, 30), 30 * 0.15, 1e-12);  // under 2 H steps: H times the mean
  EXPECT_NEAR(evaluate(in, "none", "none", 4).round_s, 0.6 + evaluate(in, "none", "none", 4).sync_s + report(in), 1e-12);
  // Delayed: a round ends when its steps and the exchange beside them have,
  // round by round. At H 1 every window is 0.2 (one site is slow each
  // step); with an exchange of 0.25 s, each round waits 0.05 s more.
  EXPECT_NEAR(round_compute_s(in, 1, 0.0, 0.25), 0.25, 1e-12);
  EXPECT_NEAR(round_compute_s(in, 2, 0.0, 0.35), (20 * 0.4 + 19 * 0.35) / 39.0, 1e-12);
  const auto delayed = evaluate(in, "none", "delayed", 2);
  EXPECT_NEAR(delayed.round_s, round_compute_s(in, 2, 0.0, delayed.sync_s - report(in)) + report(in), 1e-12);
  EXPECT_NEAR(delayed.exposed_s, delayed.round_s - round_compute_s(in, 2), 1e-12);
  in.site_steps.clear();
  EXPECT_NEAR(round_compute_s(in, 4), 4 * 0.15, 1e-12);  // no series: H times step_s
}

// Three one-rank sites on a host of 2 cores: the probe saw them take turns
// unevenly (0.3, 0.3 and 0.45 s a step, all stepping at once). In a round,
// short or long, the sites that finish first hand their share on, so the
// three take what the host's cores can do: 3 / (1/0.3 + 1/0.3 + 1/0.45)
// steps' worth, not the slowest site's pace. A fourth site on its own host
// keeps its own pace, and its series' windows where it varies.
TEST(PlanModelTest, SitesSharingAHostsCoresFinishAtTheHostsRate) {
  auto in = inputs(4, 100.0, 50.0, 1000, 0.45);
  in.site_steps = {std::vector<double>(40, 0.3), std::vector<double>(40, 0.3), std::vector<double>(40, 0.45),
                   std::vector<double>(40, 0.2)};
  EXPECT_NEAR(round_compute_s(in, 4), 4 * 0.45, 1e-12);  // not shared: the slowest site's pace
  in.site_shared_host = {0, 0, 0, -1};
  in.site_ranks = {1, 1, 1, 1};
  const double host = 3.0 / (1 / 0.3 + 1 / 0.3 + 1 / 0.45);
  EXPECT_NEAR(round_compute_s(in, 4), 4 * host, 1e-12);    // short rounds and long alike: at the host's rate
  EXPECT_NEAR(round_compute_s(in, 30), 30 * host, 1e-12);
  in.site_steps[3].assign(40, 0.5);                        // the site on its own host is slower still
  EXPECT_NEAR(round_compute_s(in, 30), 30 * 0.5, 1e-12);
  in.site_steps[3].assign(40, 0.2);
  in.site_ranks = {1, 2, 1, 1};  // a site of two ranks weighs twice
  EXPECT_NEAR(round_compute_s(in, 30), 30 * 4.0 / (1 / 0.3 + 2 / 0.3 + 1 / 0.45), 1e-12);
  in.site_ranks = {1, 1, 1, 1};
  for (std::size_t k = 0; k < 40; ++k) in.site_steps[3][k] = k % 2 == 0 ? 0.1 : 0.7;
  EXPECT_NEAR(round_compute_s(in, 1), (host + 0.7) / 2, 1e-12);  // H 1: the host's pace or site 3's step
  EXPECT_NEAR(round_compute_s(in, 2), 0.8, 1e-12);
}

// Steps run 20% slower with an exchange in flight on site 1 (site 0 not at
// all): a delayed exchange that lasts half the round's compute slows half of
// the steps of the round, which waits for site 1.
TEST(PlanModelTest, OverlappedStepsPayTheMeasuredSlowdown) {
  auto in = inputs(2, 100.0, 50.0, 4000000, 0.1);
  in.site_steps.assign(2, std::vector<double>(100, 0.1));
  in.site_overlap_slowdown = {0.9, 1.2};  // under 1: noise, counts as 1
  EXPECT_NEAR(round_compute_s(in, 10, 0.5), 1.1, 1e-12);
  EXPECT_NEAR(round_compute_s(in, 10, 3.0), 1.2, 1e-12);  // at most all of them
  EXPECT_NEAR(round_compute_s(in, 10), 1.0, 1e-12);
  const auto blocking = evaluate(in, "int8", "none", 40);
  EXPECT_NEAR(blocking.round_s, 4.0 + blocking.sync_s + report(in), 1e-12);  // blocking: nothing in flight while stepping
  const auto delayed = evaluate(in, "int8", "delayed", 40);
  const double f = blocking.sync_s / 4.0;
  ASSERT_LT(f, 1.0);
  EXPECT_NEAR(delayed.round_s, 4.0 * (1.0 - f) + 4.8 * f + report(in), 1e-12);
  EXPECT_NEAR(delayed.exposed_s, report(in), 1e-12);
  in.site_steps.clear();  // without series: H times step_s, the worst slowdown on the overlapped share
  EXPECT_NEAR(round_compute_s(in, 10, 0.5), 1.1, 1e-12);
}

// An exchange that lasts as long as the steps on average, but 0.8 or 1.2
// times that by turns: half the rounds wait for it 0.2 of the steps' time,
// where a fixed exchange time would say no round waits. Blocking rounds
// expose the mean whatever the spread.
TEST(PlanModelTest, OverlappedRoundsWaitForTheLongerOfStepsAndAVaryingExchange) {
  auto in = inputs(2, 100.0, 50.0, 4000000, 0.1);
  const double sync = evaluate(in, "int8", "none", 1).sync_s;
  const int H = 10;
  in.step_s = sync / H;  // the steps take as long as the mean exchange
  EXPECT_NEAR(evaluate(in, "int8", "delayed", H).exposed_s, report(in), 1e-12);
  in.exchange_spread = {0.8, 1.2};
  const auto delayed = evaluate(in, "int8", "delayed", H);
  EXPECT_NEAR(delayed.exposed_s, 0.5 * std::max(report(in), 0.2 * sync) + 0.5 * report(in), 1e-12);
  EXPECT_NEAR(delayed.sync_s, sync, 1e-12);  // the mean is the model's
  EXPECT_NEAR(evaluate(in, "int8", "none", H).exposed_s, sync + report(in), 1e-12);
  // Streaming: each fragment's exchange against tau steps, over the spread.
  const auto streaming = evaluate(in, "int8", "streaming", 20);
  const double one = streaming.sync_s / streaming.fragments, covered = streaming.tau * in.step_s;
  EXPECT_NEAR(streaming.exposed_s,
              streaming.fragments * 0.5 * (std::max(0.0, 0.8 * one - covered) + std::max(0.0, 1.2 * one - covered)) +
                  report(in),
              1e-12);
}

// Blocking, the report waits behind the exchange; delayed, a round lasts the
// larger of its steps plus the report and the exchange beside them, so an
// exchange that outlasts both hides the report and the vote.
TEST(PlanModelTest, ADelayedExchangeThatOutlastsTheStepsHidesTheRoundsControlMessages) {
  auto in = inputs(2, 100.0, 50.0, 4000000, 0.1);
  const double sync = evaluate(in, "int8", "none", 1).sync_s;
  const int H = 10;
  in.step_s = sync / H;
  in.exchange_spread = {0.8, 1.2};
  in.control_s = 0.01;
  ASSERT_GT(0.2 * sync, 0.01);
  EXPECT_NEAR(evaluate(in, "int8", "none", H).exposed_s, sync + 0.01, 1e-12);
  // The rounds at 1.2 last their exchange; those at 0.8, the steps and the report.
  EXPECT_NEAR(evaluate(in, "int8", "delayed", H).exposed_s, 0.5 * (1.2 * sync - sync) + 0.5 * 0.01, 1e-12);
  in.step_s = 2.0 * sync / H;  // no exchange outlasts the steps: the report, every round
  EXPECT_NEAR(evaluate(in, "int8", "delayed", H).exposed_s, 0.01, 1e-12);
  in.control_s = 0.0;  // unmeasured: the report gather on the model's links
  EXPECT_NEAR(evaluate(in, "int8", "delayed", H).exposed_s, report(in), 1e-12);
  in.step_s = 0.5 * sync / H;  // every exchange outlasts the steps and the report: the exchange alone
  in.control_s = 0.01;
  EXPECT_NEAR(evaluate(in, "int8", "delayed", H).exposed_s, sync - 0.5 * sync, 1e-12);
}

TEST(PlanModelTest, UtilizationGoalTakesTheSmallestHThatReachesIt) {
  const auto in = inputs(3, 100.0, 30.0, 2000000, 0.05);
  PlanCandidate best;
  std::string rule;
  ASSERT_TRUE(recommend(in, {"none", "fp16", "int8"}, parse_goal("utilization=0.9"), 0.95, 20, best, rule));
  EXPECT_GE(best.utilization, 0.9);
  EXPECT_LT(evaluate(in, best.codec, best.overlap, best.H - 1).utilization, 0.9);
  // No listed codec and mode reaches 0.9 with a smaller H.
  for (const char* codec : {"none", "fp16", "int8"})
    for (const char* overlap : {"none", "delayed", "streaming"})
      EXPECT_LT(evaluate(in, codec, overlap, best.H - 1).utilization, 0.9) << codec << " " << overlap;
  EXPECT_NE(rule.find("smallest H"), std::string::npos);
}

TEST(PlanModelTest, BytesGoalTakesTheFewestBytesPerTokenAboveTheFloor) {
  const auto in = inputs(2, 100.0, 30.0, 2000000, 0.05);
  PlanCandidate best;
  std::string rule;
  ASSERT_TRUE(recommend(in, {"none", "int8", "int4"}, parse_goal("bytes"), 0.95, 20, best, rule));
  EXPECT_GE(best.utilization, 0.95);
  EXPECT_EQ(best.codec, "int4");
  PlanCandidate time_best;
  ASSERT_TRUE(recommend(in, {"none", "int8"}, parse_goal("time"), 0.95, 20, time_best, rule));
  EXPECT_EQ(time_best.H, 20);
  for (const char* overlap : {"none", "delayed", "streaming"})
    EXPECT_GE(evaluate(in, "none", overlap, 20).round_s, time_best.round_s - 1e-12);
}

// Steps 30% slower beside an exchange: a longer exchange slows more of them,
// which raises utilization while the round grows; goal time takes the
// shorter round.
TEST(PlanModelTest, TimeGoalTakesTheShortestRoundNotTheHighestUtilization) {
  auto in = inputs(2, 20.0, 1.0, 2000000, 0.05);
  in.site_steps.assign(2, std::vector<double>(200, 0.05));
  in.site_overlap_slowdown = {1.3, 1.3};
  in.control_s = 0.01;  // each round's report: a round is never wholly compute
  const auto int8 = evaluate(in, "int8", "delayed", 20), int4 = evaluate(in, "int4", "delayed", 20);
  ASSERT_LT(int4.round_s, int8.round_s);
  ASSERT_LT(int4.utilization, int8.utilization);  // the trap
  PlanCandidate best;
  std::string rule;
  ASSERT_TRUE(recommend(in, {"int8", "int4"}, parse_goal("time"), 0.95, 20, best, rule));
  EXPECT_EQ(best.codec, "int4");
  EXPECT_NE(rule.find("shortest round"), std::string::npos);
}

TEST(PlanModelTest, AGoalNoPlanReachesIsSaid) {
  auto in = inputs(2, 1.0, 500.0, 100000000, 0.001);
  in.h_max = 10;
  PlanCandidate best;
  std::string rule;
  EXPECT_FALSE(recommend(in, {"none"}, parse_goal("utilization=0.99"), 0.95, 10, best, rule));
}

TEST(PlanModelTest, GoalsAreParsedOrRefused) {
  EXPECT_DOUBLE_EQ(parse_goal("utilization=0.95").utilization, 0.95);
  EXPECT_EQ(parse_goal("bytes").kind, PlanGoal::Kind::kBytes);
  EXPECT_THROW(parse_goal("utilization=1.5"), InputError);
  EXPECT_THROW(parse_goal("utilization="), InputError);
  EXPECT_THROW(parse_goal("speed"), InputError);
}

TEST(PlanModelTest, TheFragmentSetsWhatThePlanNeeds) {
  PlanCandidate c;
  c.codec = "int8";
  c.overlap = "streaming";
  c.H = 40;
  c.fragments = 4;
  c.tau = 5;
  EXPECT_EQ(as_sets(c), "--set compression.codec=int8 --set sync.H=40 --set sync.overlap=streaming "
                        "--set sync.fragments=4 --set sync.overlap_steps=5");
  EXPECT_NE(as_toml(c).find("[sync]\nH = 40\noverlap = \"streaming\"\nfragments = 4\noverlap_steps = 5\n"),
            std::string::npos);
}
