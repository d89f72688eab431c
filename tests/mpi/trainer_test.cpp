// The round loop on real ranks: identical replicas after every outer step,
// unequal sites, and the data-parallel special case of DiLoCo.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "comm/mpi_communicator.h"
#include "outer/trainer.h"
#include "../inner/fixtures.h"
#include "trainer_fixtures.h"

using namespace diloco;

namespace {

inner::Dataset corpus() { return inner::testing::small_corpus(); }

inner::ModelConfig tiny() { return diloco::testing::tiny_model(); }

using diloco::testing::fnv1a;

struct RunSetup {
  int sites = 2;
  int H = 3;
  outer::OuterConfig outer;
  inner::InnerOptimConfig optim;
  inner::DataConfig data;
  std::uint64_t seed = 17;
  std::optional<outer::SyncConfig> sync;  // default: fixed H, blocking
  std::string codec = "none";
  inner::DeviceConfig device;  // stage_params: the host copy every CUDA run uses
  inner::ModelConfig model = tiny();
};

outer::OuterParts parts_of(const RunSetup& s) {
  outer::OuterParts parts;
  parts.exchange = [codec = s.codec](comm::Communicator& leaders) {
    return std::make_unique<outer::Exchange>(leaders, compression::make_codec(codec));
  };
  parts.optimizer = [outer = s.outer](std::size_t params) { return outer::make_outer_optimizer(outer, params); };
  return parts;
}

outer::SyncConfig sync_of(int H) {
  outer::SyncConfig c;
  c.H = H;
  return c;
}

using diloco::testing::shard_of;

// Everything one rank needs for a run, built in dependency order.
struct Run {
  Run(const RunSetup& s, const inner::Dataset& c)
      : comms(comm::make_mpi_site_comms(s.sites)),
        group(*comms.site),
        loop(s.model, s.optim, s.data, c, shard_of(comms.topology), group, s.seed,
             static_cast<std::int64_t>(s.outer.rounds) * s.H, s.device),
        trainer(comms, loop, parts_of(s), s.outer, s.sync ? *s.sync : sync_of(s.H), outer::EvalConfig{1, 8}) {}

  comm::SiteComms comms;
  outer::CommReplicaGroup group;
  inner::InnerLoop loop;
  outer::Trainer trainer;
};

std::unique_ptr<Run> make_run(const RunSetup& s, const inner::Dataset& c) { return std::make_unique<Run>(s, c); }

// Every rank's copy of `values`, indexed by world rank.
std::vector<std::vector<float>> gather_floats(comm::Communicator& world, std::span<const float> values) {
  auto raw = world.all_gather(std::as_bytes(values));
  std::vector<std::vector<float>> out(raw.size());
  for (std::size_t r = 0; r < raw.size(); ++r) {
    out[r].resize(raw[r].size() / sizeof(float));
    std::memcpy(out[r].data(), raw[r].data(), raw[r].size());
  }
  return out;
}

}  // namespace

// Replicas agree bit for bit after every round, whatever the model.
void expect_identical_replicas(RunSetup s) {
  auto c = corpus();
  s.outer.rounds = 4;
  s.optim.lr = 3e-3;
  s.optim.warmup_steps = 2;
  auto run = make_run(s, c);
  auto world = comm::MpiCommunicator::world();
  int rounds_seen = 0;
  std::uint64_t last_bytes = 0;
  outer::Trainer::Hooks hooks;
  hooks.on_round = [&](const outer::RoundMetrics& m) {
    ++rounds_seen;
    const std::uint64_t mine = fnv1a(run->loop.params());
    auto all = world->all_gather(std::as_bytes(std::span<const std::uint64_t>(&mine, 1)));
    for (int r = 0; r < world->size(); ++r) {
      std::uint64_t h;
      std::memcpy(&h, all[r].data(), sizeof(h));
      EXPECT_EQ(h, mine) << "rank " << r << " differs from rank " << world->rank() << " after round " << m.round;
    }
    if (world->rank() == 0) {
      EXPECT_GT(m.bytes_sent, last_bytes);
      last_bytes = m.bytes_sent;
      EXPECT_EQ(m.tokens, static_cast<std::int64_t>(m.round) * s.H * s.data.batch_size * 16 * world->size());
      EXPECT_TRUE(std::isfinite(m.train_loss));
      ASSERT_TRUE(m.eval_loss.has_value());
    }
  };
  auto summary = run->trainer.run(hooks);
  EXPECT_EQ(rounds_seen, 4);
  EXPECT_EQ(summary.inner_steps, 4 * s.H);
  EXPECT_LT(summary.final_eval_loss, summary.initial_eval_loss);
  if (run->comms.topology.is_leader()) {
    auto global = run->trainer.global_params();
    auto local = run->loop.params();
    EXPECT_EQ(std::memcmp(global.data(), local.data(), local.size_bytes()), 0);
  }
}

TEST(TrainerTest, EveryRankHoldsBitIdenticalGlobalParamsAfterEachOuterStep) { expect_identical_replicas({}); }

TEST(TrainerTest, LlamaReplicasStayBitIdentical) {
  RunSetup s;
  s.model.kind = inner::ModelKind::kLlama;
  s.model.n_kv_heads = 1;  // grouped-query attention
  expect_identical_replicas(s);
}

// A module scripted in Python (run_torchscript_trainer.sh exports it and
// names it in DILOCO_TS_LLAMA).
TEST(TrainerTest, TorchScriptReplicasStayBitIdentical) {
  const char* path = std::getenv("DILOCO_TS_LLAMA");
  if (!path) GTEST_SKIP() << "DILOCO_TS_LLAMA not set (run through tests/mpi/run_torchscript_trainer.sh)";
  RunSetup s;
  s.model.kind = inner::ModelKind::kTorchScript;
  s.model.path = path;
  expect_identical_replicas(s);
}

TEST(TrainerTest, UnequalSitesAverageWeightedByTokens) {
  auto world = comm::MpiCommunicator::world();
  if (world->size() != 3) GTEST_SKIP() << "runs with 3 ranks (2 + 1)";
  auto c = corpus();
  RunSetup s;
  s.outer.rounds = 1;
  s.outer.kind = outer::OuterKind::kSgd;
  s.outer.lr = 1.0;
  s.outer.momentum = 0.0;
  auto run = make_run(s, c);
  ASSERT_EQ(run->comms.topology.site_sizes, (std::vector<int>{2, 1}));
  const std::vector<float> start(run->loop.params().begin(), run->loop.params().end());
  std::vector<float> after_inner;
  outer::Trainer::Hooks hooks;
  hooks.on_step = [&](int, int step, double) {
    if (step == s.H - 1) after_inner.assign(run->loop.params().begin(), run->loop.params().end());
  };
  run->trainer.run(hooks);
  // Site 0 (ranks 0-1) processed twice the tokens of site 1 (rank 2), so SGD
  // with lr 1 lands on 2/3 of site 0's params plus 1/3 of site 1's.
  auto sites = gather_floats(*world, after_inner);
  auto now = run->loop.params();
  double max_err = 0.0;
  for (std::size_t i = 0; i < now.size(); ++i) {
    const double expected = start[i] - (2.0 / 3.0 * (start[i] - sites[0][i]) + 1.0 / 3.0 * (start[i] - sites[2][i]));
    max_err = std::max(max_err, std::abs(expected - now[i]));
  }
  EXPECT_LT(max_err, 1e-6);
  EXPECT_NE(sites[0], sites[2]);  // the sites really trained apart
}

TEST(TrainerTest, OneSiteWithHOneAndSgdLrOneIsDataParallelAdamW) {
  auto c = corpus();
  RunSetup s;
  s.sites = 1;
  s.H = 1;
  s.outer.rounds = 20;
  s.outer.kind = outer::OuterKind::kSgd;
  s.outer.lr = 1.0;
  s.outer.momentum = 0.0;
  s.optim.lr = 3e-3;
  s.optim.warmup_steps = 3;
  auto diloco = make_run(s, c);
  diloco->trainer.run({});

  // Plain data-parallel AdamW: the same inner loop, same seed, 20 steps, no outer loop.
  auto comms = comm::make_mpi_site_comms(1);
  outer::CommReplicaGroup group(*comms.site);
  inner::InnerLoop plain(tiny(), s.optim, s.data, c, shard_of(comms.topology), group, s.seed, 20);
  plain.run(20);

  auto a = diloco->loop.params();
  auto b = plain.params();
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(double(a[i]) - double(b[i])));
  EXPECT_LE(max_diff, 1e-5);
  // It must have trained at all, or the comparison says nothing.
  inner::InnerLoop fresh(tiny(), s.optim, s.data, c, shard_of(comms.topology), group, s.seed, 20);
  double moved = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) moved = std::max(moved, std::abs(double(a[i]) - double(fresh.params()[i])));
  EXPECT_GT(moved, 1e-3);
}

namespace {

// Final params and every round's eval loss of one run.
struct Outcome {
  std::vector<float> params;
  std::vector<double> eval;
  std::vector<float> global;
};

Outcome run_with(const RunSetup& s, const inner::Dataset& c) {
  auto run = make_run(s, c);
  Outcome out;
  outer::Trainer::Hooks hooks;
  hooks.on_round = [&](const outer::RoundMetrics& m) { out.eval.push_back(m.eval_loss.value_or(-1.0)); };
  run->trainer.run(hooks);
  auto p = run->loop.params();
  out.params.assign(p.begin(), p.end());
  auto g = run->trainer.global_params();
  out.global.assign(g.begin(), g.end());
  return out;
}

RunSetup overlap_setup(outer::OverlapMode mode, int fragments, int tau, double alpha) {
  RunSetup s;
  s.H = 4;
  s.outer.rounds = 3;
  s.optim.lr = 3e-3;
  s.optim.warmup_steps = 2;
  s.codec = "int8";  // error feedback state and rounding travel through every path
  outer::SyncConfig sync = sync_of(s.H);
  sync.overlap = mode;
  sync.fragments = fragments;
  sync.overlap_steps = tau;
  sync.mix_alpha = alpha;
  s.sync = sync;
  return s;
}

}  // namespace

TEST(TrainerOverlapTest, StreamingWithOneFragmentAndNoOverlapIsBlockingDiLoCo) {
  auto c = corpus();
  const auto blocking = run_with(overlap_setup(outer::OverlapMode::kNone, 1, 0, 0.0), c);
  const auto streaming = run_with(overlap_setup(outer::OverlapMode::kStreaming, 1, 0, 0.0), c);
  ASSERT_EQ(blocking.params.size(), streaming.params.size());
  EXPECT_EQ(std::memcmp(blocking.params.data(), streaming.params.data(), blocking.params.size() * sizeof(float)), 0);
  EXPECT_EQ(blocking.eval, streaming.eval);
}

TEST(TrainerOverlapTest, DelayedAndStreamingAreDeterministic) {
  auto c = corpus();
  for (const auto& s : {overlap_setup(outer::OverlapMode::kDelayed, 1, 0, 0.5),
                        overlap_setup(outer::OverlapMode::kStreaming, 2, 2, 0.5),
                        overlap_setup(outer::OverlapMode::kStreaming, 4, 1, 0.5)}) {
    const auto a = run_with(s, c);
    const auto b = run_with(s, c);
    EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)), 0)
        << "overlap " << static_cast<int>(s.sync->overlap) << " fragments " << s.sync->fragments;
    EXPECT_EQ(a.eval, b.eval);
    // The final update is not lost: every run ends on the global params.
    if (!a.global.empty()) {
      EXPECT_EQ(std::memcmp(a.params.data(), a.global.data(), a.params.size() * sizeof(float)), 0);
    }
    for (double e : a.eval) EXPECT_TRUE(std::isfinite(e));
  }
}

TEST(TrainerOverlapTest, OverlapModesDifferFromBlockingButStillLearn) {
  auto c = corpus();
  const auto blocking = run_with(overlap_setup(outer::OverlapMode::kNone, 1, 0, 0.0), c);
  const auto delayed = run_with(overlap_setup(outer::OverlapMode::kDelayed, 1, 0, 0.5), c);
  const auto streaming = run_with(overlap_setup(outer::OverlapMode::kStreaming, 2, 2, 0.5), c);
  EXPECT_NE(blocking.params, delayed.params);
  EXPECT_NE(blocking.params, streaming.params);
  for (const auto* o : {&delayed, &streaming}) EXPECT_LT(o->eval.back(), blocking.eval.front() + 0.5);
}

// On CUDA the outer loop works on a host copy of the parameters; the same
// path forced on the CPU must give the live buffer's results bit for bit, in
// every overlap mode (each reads and writes the parameters differently).
TEST(TrainerOverlapTest, HostStagedParametersMatchTheLiveBuffer) {
  auto c = corpus();
  for (auto s : {overlap_setup(outer::OverlapMode::kNone, 1, 0, 0.0),
                 overlap_setup(outer::OverlapMode::kDelayed, 1, 0, 0.5),
                 overlap_setup(outer::OverlapMode::kStreaming, 2, 2, 0.5)}) {
    const auto live = run_with(s, c);
    s.device.stage_params = true;
    const auto staged = run_with(s, c);
    EXPECT_EQ(std::memcmp(live.params.data(), staged.params.data(), live.params.size() * sizeof(float)), 0)
        << "overlap " << static_cast<int>(s.sync->overlap);
    EXPECT_EQ(live.eval, staged.eval);
  }
}
