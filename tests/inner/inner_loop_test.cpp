// The inner loop alone (one replica): it learns, it is deterministic, and its
// flat parameter view is the live model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "inner/inner_loop.h"
#include "fixtures.h"
#include "inner/lr_schedule.h"

using namespace diloco::inner;
using namespace diloco::inner::testing;

namespace {

}  // namespace

TEST(LrScheduleTest, WarmsUpLinearlyThenDecaysToTheFloor) {
  LrSchedule s{1.0, 10, 110, 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12);
}

TEST(InnerLoopTest, TrainingLowersHeldOutLoss) {
  set_compute_threads(1);
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  data.batch_size = 8;
  InnerLoop loop(tiny(), fast(), data, corpus, {}, group, 3, 60);
  const double before = loop.eval_loss(32);
  EXPECT_NEAR(before, std::log(256.0), 0.1);
  auto stats = loop.run(60);
  EXPECT_EQ(stats.steps, 60);
  EXPECT_EQ(stats.tokens, 60 * 8 * 16);
  EXPECT_EQ(loop.step(), 60);
  EXPECT_LT(loop.eval_loss(32), before - 1.5);
}

TEST(InnerLoopTest, SameSeedGivesBitIdenticalParameters) {
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  data.batch_size = 4;
  InnerLoop a(tiny(), fast(), data, corpus, {}, group, 11, 10);
  InnerLoop b(tiny(), fast(), data, corpus, {}, group, 11, 10);
  a.run(5);
  b.run(5);
  auto pa = a.params();
  auto pb = b.params();
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size_bytes()), 0);
}

TEST(InnerLoopTest, WritingTheFlatViewChangesTheModel) {
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  InnerLoop loop(tiny(), fast(), data, corpus, {}, group, 5, 10);
  const double before = loop.eval_loss(8);
  for (float& p : loop.params()) p = 0.0f;  // every logit equal: exactly uniform
  const double after = loop.eval_loss(8);
  EXPECT_NE(before, after);
  EXPECT_NEAR(after, std::log(256.0), 1e-5);
}

TEST(InnerLoopTest, NonFiniteLossStopsTheRoundWithoutApplyingTheStep) {
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  InnerLoop loop(tiny(), fast(), data, corpus, {}, group, 5, 10);
  loop.run(2);
  auto params = loop.params();
  params[0] = std::numeric_limits<float>::quiet_NaN();  // poison one weight
  const std::vector<float> before(params.begin(), params.end());
  auto stats = loop.run(5);
  EXPECT_TRUE(stats.diverged);
  EXPECT_EQ(stats.steps, 0);
  // Nothing was applied: every other weight is as it was, and still finite.
  for (std::size_t i = 1; i < before.size(); ++i) ASSERT_EQ(loop.params()[i], before[i]) << i;
}

TEST(InnerLoopTest, OptimizerStateRoundTripsThroughBytes) {
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  InnerLoop a(tiny(), fast(), data, corpus, {}, group, 8, 20);
  a.run(4);
  const std::string state = a.save_state();
  InnerLoop b(tiny(), fast(), data, corpus, {}, group, 8, 20);
  b.load_state(state);
  std::copy(a.params().begin(), a.params().end(), b.params().begin());
  EXPECT_EQ(b.step(), 4);
  a.run(3);
  b.run(3);
  EXPECT_EQ(std::memcmp(a.params().data(), b.params().data(), a.params().size_bytes()), 0);
  ModelConfig other = tiny();
  other.d_model = 16;
  InnerLoop c(other, fast(), data, corpus, {}, group, 8, 20);
  EXPECT_THROW(c.load_state(state), std::runtime_error);
}

// Muon's momentum travels with the state, and a state saved by one inner
// optimizer is refused by the other, naming both; the loop refusing it is
// left as it was.
TEST(InnerLoopTest, MuonStateRoundTripsAndTheOtherOptimizerIsRefused) {
  auto corpus = small_corpus();
  SoloGroup group;
  DataConfig data;
  InnerOptimConfig muon = fast();
  muon.kind = InnerOptimizerKind::kMuon;
  InnerLoop a(tiny(), muon, data, corpus, {}, group, 8, 20);
  a.run(4);
  const std::string state = a.save_state();
  InnerLoop b(tiny(), muon, data, corpus, {}, group, 8, 20);
  b.load_state(state);
  std::copy(a.params().begin(), a.params().end(), b.params().begin());
  a.run(3);
  b.run(3);
  EXPECT_EQ(std::memcmp(a.params().data(), b.params().data(), a.params().size_bytes()), 0);

  InnerLoop adamw(tiny(), fast(), data, corpus, {}, group, 8, 20);
  adamw.run(2);
  const std::string adamw_state = adamw.save_state();
  try {
    adamw.load_state(state);
    ADD_FAILURE() << "a Muon state was loaded by an AdamW loop";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("saved with inner.optimizer = \"muon\"; this run uses \"adamw\""),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(adamw.save_state(), adamw_state);
  EXPECT_THROW(b.load_state(adamw_state), std::runtime_error);
}
