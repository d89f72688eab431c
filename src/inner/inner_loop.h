// The inner step loop of one data-parallel group: AdamW steps on a GPT, with
// gradients averaged across the group's replicas every step. It sees flat
// parameter memory and a ReplicaGroup, never sites or communicators, so the
// outer loop can read and overwrite the parameters between rounds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inner/corpus.h"
#include "inner/model_config.h"

namespace diloco::inner {


// The replicas that train one model copy together (a site, seen from inside).
class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sums over the group.
  virtual void sum(std::span<float> values) = 0;
  virtual void sum(std::span<double> values) = 0;
};

// A group of one replica: plain single-process training.
class SoloGroup final : public ReplicaGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum(std::span<float>) override {}
  void sum(std::span<double>) override {}
};

struct InnerOptimConfig {
  double lr = 4e-4;  // DiLoCo's inner AdamW learning rate
  std::int64_t warmup_steps = 1000;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;  // max global gradient norm; 0 turns clipping off
};

struct InnerStats {
  int steps = 0;
  double mean_loss = 0.0;      // training loss averaged over steps and replicas
  std::int64_t tokens = 0;     // tokens the whole group processed
  double seconds = 0.0;
  // The loss or gradient became non-finite: the loop stopped before applying
  // that step, so parameters and optimizer state are still finite.
  bool diverged = false;
};

class InnerLoop {
 public:
  // Builds the model from a generator seeded with `seed` (identical on every
  // rank), so all replicas start equal. `total_steps` sets the cosine horizon.
  InnerLoop(const ModelConfig& model, const InnerOptimConfig& optim, const DataConfig& data,
            const Corpus& corpus, ShardSpec shard, ReplicaGroup& group, std::uint64_t seed,
            std::int64_t total_steps);
  ~InnerLoop();
  InnerLoop(const InnerLoop&) = delete;
  InnerLoop& operator=(const InnerLoop&) = delete;

  // Runs `steps` optimizer steps. `on_step(i, loss)` is called after each.
  InnerStats run(int steps, const std::function<void(int, double)>& on_step = {});

  // Makes every step take `factor` times its compute time by sleeping the
  // rest: a slower device, for tests of heterogeneous sites. 1 turns it off.
  void set_slowdown(double factor);

  // Mean held-out loss over `windows` fixed windows, split across the group.
  double eval_loss(int windows);

  // The model's layers (embeddings, each transformer block, the final norm)
  // in the order their parameters sit in params(): name, first element, count.
  struct Layer {
    std::string name;
    std::size_t offset = 0;
    std::size_t count = 0;
  };
  std::vector<Layer> layers() const;

  // All parameters as one contiguous fp32 buffer; writes take effect at once.
  std::span<float> params();
  std::size_t num_params() const;
  // Tokens the whole group processes per inner step.
  std::int64_t tokens_per_step() const;
  std::int64_t step() const;  // inner steps taken so far

  // The optimizer state and step counter, as bytes (a checkpoint). load_state
  // throws std::runtime_error when the bytes do not fit this model.
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace diloco::inner

namespace diloco::inner {

// Intra-op threads for this process's tensor math (one per rank when ranks
// share cores).
void set_compute_threads(int threads);

}  // namespace diloco::inner
