// Outer optimizers against hand-computed updates, and the special cases
// DiLoCo relies on (SGD lr 1 momentum 0 = parameter averaging).
#include <gtest/gtest.h>

#include "outer/outer_optimizer.h"
#include "outer/pseudo_gradient.h"

using namespace diloco::outer;

TEST(OuterOptimizerTest, NesterovMatchesHandComputedSteps) {
  OuterConfig c;
  c.kind = OuterKind::kNesterov;
  c.lr = 0.7;
  c.momentum = 0.9;
  auto opt = make_outer_optimizer(c, 2);
  std::vector<float> theta{1.0f, -2.0f};
  // Step 1: g = (0.1, -0.2); buf = g; update = g + 0.9 g = 1.9 g.
  opt->step(theta, std::vector<float>{0.1f, -0.2f});
  EXPECT_FLOAT_EQ(theta[0], 1.0f - 0.7f * 1.9f * 0.1f);   // 0.867
  EXPECT_FLOAT_EQ(theta[1], -2.0f + 0.7f * 1.9f * 0.2f);  // -1.734
  // Step 2: g = (0.3, 0); buf = 0.9*(0.1,-0.2) + g = (0.39, -0.18);
  // update = g + 0.9 buf = (0.651, -0.162).
  opt->step(theta, std::vector<float>{0.3f, 0.0f});
  EXPECT_NEAR(theta[0], 0.867f - 0.7f * 0.651f, 1e-6);
  EXPECT_NEAR(theta[1], -1.734f + 0.7f * 0.162f, 1e-6);
  ASSERT_EQ(opt->state().size(), 2u);
  EXPECT_NEAR(opt->state()[0], 0.39f, 1e-7);
  EXPECT_NEAR(opt->state()[1], -0.18f, 1e-7);
}

TEST(OuterOptimizerTest, HeavyBallSgdMatchesHandComputedSteps) {
  OuterConfig c;
  c.kind = OuterKind::kSgd;
  c.lr = 0.5;
  c.momentum = 0.5;
  auto opt = make_outer_optimizer(c, 1);
  std::vector<float> theta{1.0f};
  opt->step(theta, std::vector<float>{1.0f});  // buf = 1
  EXPECT_FLOAT_EQ(theta[0], 0.5f);
  opt->step(theta, std::vector<float>{1.0f});  // buf = 1.5
  EXPECT_FLOAT_EQ(theta[0], -0.25f);
}

TEST(OuterOptimizerTest, SgdLrOneWithoutMomentumIsParameterAveraging) {
  OuterConfig c;
  c.kind = OuterKind::kSgd;
  c.lr = 1.0;
  c.momentum = 0.0;
  auto opt = make_outer_optimizer(c, 3);
  EXPECT_TRUE(opt->state().empty());
  const std::vector<float> global{1.0f, 2.0f, 3.0f};
  const std::vector<float> site_a{0.5f, 2.5f, 3.0f};
  const std::vector<float> site_b{1.5f, 1.0f, 2.0f};
  std::vector<float> da(3), db(3), avg(3);
  compute_pseudo_gradient(global, site_a, da);
  compute_pseudo_gradient(global, site_b, db);
  for (int i = 0; i < 3; ++i) avg[i] = 0.5f * (da[i] + db[i]);
  auto theta = global;
  opt->step(theta, avg);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(theta[i], 0.5f * (site_a[i] + site_b[i]));
}

TEST(OuterOptimizerTest, EmptyParameterSetIsANoOp) {
  auto opt = make_outer_optimizer(OuterConfig{}, 0);
  std::vector<float> theta;
  opt->step(theta, std::vector<float>{});
  EXPECT_TRUE(theta.empty());
}
