// Data-parallel sync across sites on real ranks: one model everywhere (bit-
// identical parameters on every rank after every inner step) that equals a
// single process training on the combined batch of all ranks.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "inner/lr_schedule.h"
#include "inner/models/model.h"
#include "outer/trainer.h"
#include "../inner/fixtures.h"
#include "trainer_fixtures.h"

using namespace diloco;

namespace {

inner::ModelConfig tiny() { return diloco::testing::tiny_model(); }

constexpr std::uint64_t kSeed = 23;
constexpr int kH = 5;
constexpr int kRounds = 4;

inner::InnerOptimConfig optim() {
  inner::InnerOptimConfig o;
  o.lr = 3e-3;
  o.warmup_steps = 3;
  o.grad_clip = 0.5;  // clipping acts on the combined gradient: it must be the averaged one
  return o;
}

using diloco::testing::shard_of;

// Sites: 2 for 2-3 ranks (3 ranks: 2 + 1), 3 for 4 ranks (2 + 1 + 1: the ring algorithm).
int sites_for(int world) { return world >= 4 ? 3 : 2; }

struct DpRun {
  DpRun(const inner::Dataset& data, const std::string& codec)
      : comms(comm::make_mpi_site_comms(sites_for(comm::MpiCommunicator::world()->size()))),
        group(*comms.site),
        loop(tiny(), optim(), inner::DataConfig{}, data, shard_of(comms.topology), group, kSeed,
             static_cast<std::int64_t>(kRounds) * kH),
        trainer(comms, loop, parts(codec), outer::OuterConfig{kRounds}, sync(), outer::EvalConfig{kRounds, 4}) {}

  static outer::OuterParts parts(const std::string& codec) {
    outer::OuterParts p;
    p.exchange = [codec](comm::Communicator& leaders) {
      outer::ExchangeOptions options;
      options.error_feedback = codec != "none";
      return std::make_unique<outer::Exchange>(leaders, compression::make_codec(codec), options);
    };
    p.optimizer = [](std::size_t n) { return outer::make_outer_optimizer(outer::OuterConfig{}, n); };
    return p;
  }
  static outer::SyncConfig sync() {
    outer::SyncConfig s;
    s.mode = outer::SyncMode::kDataParallel;
    s.H = kH;
    return s;
  }

  comm::SiteComms comms;
  outer::CommReplicaGroup group;
  inner::InnerLoop loop;
  outer::Trainer trainer;
};

using diloco::testing::fnv1a;

// Written here from libtorch directly (not through InnerLoop): one model, one
// AdamW with the inner loop's documented settings, each step on the rows of
// every rank's batch at once.
class CombinedBatchReference {
 public:
  explicit CombinedBatchReference(std::int64_t total_steps)
      : schedule{optim().lr, optim().warmup_steps, total_steps, optim().min_lr_ratio} {
    torch::manual_seed(kSeed);
    model_ = inner::make_model(tiny());
    std::vector<torch::Tensor> decayed, plain;
    for (auto& [name, p] : model_->named_parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
    const auto o = optim();
    auto options = torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).weight_decay(o.weight_decay);
    auto no_decay = options;
    no_decay.weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
    groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(no_decay));
    adamw_ = std::make_unique<torch::optim::AdamW>(std::move(groups), options);
  }

  // `rows`: every rank's batch of this step, (seq_len + 1) ids per row.
  void step(std::vector<std::int64_t> rows, std::int64_t step) {
    const auto T = tiny().seq_len;
    const auto n = static_cast<std::int64_t>(rows.size()) / (T + 1);
    auto tokens = torch::from_blob(rows.data(), {n, T + 1}, torch::kLong);
    adamw_->zero_grad();
    model_->loss(tokens.slice(1, 0, T), tokens.slice(1, 1, T + 1)).backward();
    std::vector<torch::Tensor> grads;
    for (auto& [name, p] : model_->named_parameters()) grads.push_back(p.grad().reshape({-1}));
    const double norm = torch::cat(grads).norm().item<double>();
    const double clip = optim().grad_clip;
    if (norm > clip)
      for (auto& [name, p] : model_->named_parameters()) p.mutable_grad().mul_(clip / (norm + 1e-6));
    for (auto& g : adamw_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(schedule.at(step));
    adamw_->step();
  }

  std::vector<float> params() {
    std::vector<torch::Tensor> flat;
    for (auto& [name, p] : model_->named_parameters()) flat.push_back(p.detach().reshape({-1}));
    auto all = torch::cat(flat).contiguous();
    return {all.data_ptr<float>(), all.data_ptr<float>() + all.numel()};
  }

 private:
  inner::LrSchedule schedule;
  std::unique_ptr<inner::Model> model_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
};

// Every step: all ranks hold the same bytes; returns the rank's params after each step.
std::vector<std::vector<float>> run_checking_identity(DpRun& run, comm::Communicator& world) {
  std::vector<std::vector<float>> after_step;
  outer::Trainer::Hooks hooks;
  hooks.on_step = [&](int round, int step, double loss) {
    EXPECT_TRUE(std::isfinite(loss));
    auto p = run.loop.params();
    const std::uint64_t mine = fnv1a(p);
    auto all = world.all_gather(std::as_bytes(std::span<const std::uint64_t>(&mine, 1)));
    for (int r = 0; r < world.size(); ++r) {
      std::uint64_t h;
      std::memcpy(&h, all[r].data(), sizeof(h));
      EXPECT_EQ(h, mine) << "rank " << r << " differs from rank " << world.rank() << " after round " << round
                         << " step " << step;
    }
    after_step.emplace_back(p.begin(), p.end());
  };
  run.trainer.run(hooks);
  return after_step;
}

}  // namespace

TEST(DataParallelTest, OneModelEverywhereEqualToTheCombinedBatch) {
  auto world = comm::MpiCommunicator::world();
  const auto data = inner::testing::small_corpus();
  DpRun run(data, "none");
  const auto after_step = run_checking_identity(run, *world);
  ASSERT_EQ(after_step.size(), static_cast<std::size_t>(kRounds * kH));

  // Every rank's shard, so every rank can rebuild every rank's batches.
  const inner::ShardSpec mine = shard_of(run.comms.topology);
  std::vector<inner::ShardSpec> shards;
  for (const auto& raw : world->all_gather(std::as_bytes(std::span<const inner::ShardSpec>(&mine, 1)))) {
    inner::ShardSpec s;
    std::memcpy(&s, raw.data(), sizeof(s));
    shards.push_back(s);
  }
  std::vector<inner::BatchSampler> samplers;
  for (const auto& s : shards)
    samplers.emplace_back(data, inner::DataConfig{}, s, tiny().seq_len, tiny().vocab, kSeed);

  CombinedBatchReference reference(static_cast<std::int64_t>(kRounds) * kH);
  double worst = 0.0;
  double moved = 0.0;
  const auto start = reference.params();
  for (int step = 0; step < kRounds * kH; ++step) {
    std::vector<std::int64_t> rows, batch;
    for (const auto& sampler : samplers) {
      sampler.train_batch(step, batch);
      rows.insert(rows.end(), batch.begin(), batch.end());
    }
    reference.step(rows, step);
    const auto expected = reference.params();
    const auto& got = after_step[static_cast<std::size_t>(step)];
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - expected[i]));
    if (step + 1 == kRounds * kH)
      for (std::size_t i = 0; i < got.size(); ++i) moved = std::max(moved, std::abs(double(got[i]) - start[i]));
  }
  EXPECT_LE(worst, 1e-5) << "largest difference from the combined-batch run over " << kRounds * kH << " steps";
  EXPECT_GT(moved, 1e-2) << "it must have trained, or the comparison says nothing";
}

// A lossy codec with error feedback still keeps one model: every site decodes
// the same bytes in the same order.
TEST(DataParallelTest, LossyCodecKeepsEveryRankIdentical) {
  auto world = comm::MpiCommunicator::world();
  const auto data = inner::testing::small_corpus();
  DpRun run(data, "int8");
  const auto after_step = run_checking_identity(run, *world);
  EXPECT_EQ(after_step.size(), static_cast<std::size_t>(kRounds * kH));
}

// Rounds report the exchanges as communication, counted in bytes sent.
TEST(DataParallelTest, MetricsCountEveryStepsExchange) {
  auto world = comm::MpiCommunicator::world();
  const auto data = inner::testing::small_corpus();
  DpRun run(data, "none");
  std::vector<outer::RoundMetrics> rounds;
  outer::Trainer::Hooks hooks;
  hooks.on_round = [&](const outer::RoundMetrics& m) { rounds.push_back(m); };
  run.trainer.run(hooks);
  ASSERT_EQ(rounds.size(), static_cast<std::size_t>(kRounds));
  if (world->rank() != 0) return;
  const std::uint64_t per_step = run.loop.num_params() * sizeof(float);
  const auto sites = static_cast<std::uint64_t>(run.comms.topology.num_sites);
  for (const auto& m : rounds) {
    // Every step each leader sends at least its gradients once.
    EXPECT_GE(m.bytes_sent, static_cast<std::uint64_t>(m.round) * kH * per_step * sites / (sites > 2 ? 2 : 1));
    EXPECT_GT(m.comm_s, 0.0);
    EXPECT_GT(m.compute_s, 0.0);
    EXPECT_TRUE(m.excluded.empty());
  }
}
