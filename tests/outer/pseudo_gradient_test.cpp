// FedNova-normalized shares against a hand-computed case, and the exact
// reduction to the plain weighted average when step counts are equal.
#include <gtest/gtest.h>

#include "outer/pseudo_gradient.h"

using namespace diloco::outer;

TEST(NormalizedSharesTest, MatchesAHandComputedFedNovaCase) {
  // Site 0: 40 steps on 400 tokens; site 1 (half as fast): 10 steps on 100.
  // Per-step data weights p = (10, 10) / 20 = (0.5, 0.5); tau_eff = 0.5*40 +
  // 0.5*10 = 25; shares p_i tau_eff / tau_i = (0.5*25/40, 0.5*25/10).
  const std::vector<double> weights{400.0, 100.0};
  const std::vector<double> steps{40.0, 10.0};
  const auto shares = normalized_shares(weights, steps);
  EXPECT_DOUBLE_EQ(shares[0], 0.3125);
  EXPECT_DOUBLE_EQ(shares[1], 1.25);
  // So sum_i share_i delta_i = 25 * mean per-step update: for deltas 40 and
  // 10 (one unit per step on both sites) the result is 25, not the plain
  // token-weighted 0.8*40 + 0.2*10 = 34 that favours the site with more steps.
  EXPECT_DOUBLE_EQ(shares[0] * 40.0 + shares[1] * 10.0, 25.0);
}

TEST(NormalizedSharesTest, EqualStepsReduceExactlyToTheWeightedAverage) {
  const std::vector<double> weights{3.0, 7.0, 11.0};
  const std::vector<double> steps{50.0, 50.0, 50.0};
  const auto shares = normalized_shares(weights, steps);
  const double total = 3.0 + 7.0 + 11.0;
  for (std::size_t s = 0; s < weights.size(); ++s) EXPECT_EQ(shares[s], weights[s] / total);
}

TEST(NormalizedSharesTest, ExcludedSitesGetNothingAndDoNotCount) {
  const std::vector<double> weights{100.0, 0.0, 100.0};
  const std::vector<double> steps{20.0, 5.0, 10.0};  // site 1's steps must not matter
  const auto shares = normalized_shares(weights, steps);
  EXPECT_EQ(shares[1], 0.0);
  // p = (5, 10) / 15; tau_eff = (5*20 + 10*10) / 15 = 200/15.
  EXPECT_NEAR(shares[0], (5.0 / 15.0) * (200.0 / 15.0) / 20.0, 1e-15);
  EXPECT_NEAR(shares[2], (10.0 / 15.0) * (200.0 / 15.0) / 10.0, 1e-15);
  const std::vector<double> same_included{100.0, 0.0, 100.0};
  const std::vector<double> equal_but_one{10.0, 3.0, 10.0};
  const auto plain = normalized_shares(same_included, equal_but_one);
  EXPECT_EQ(plain[0], 0.5);
  EXPECT_EQ(plain[2], 0.5);
}
