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

#include "inner/data/dataset.h"
#include "inner/model_config.h"

namespace diloco::inner {


// The replicas that train one model copy together (a site, seen from inside).
class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sums over the group. The float sum is handed the loop's own
  // gradient memory: device memory on CUDA when reduces_device_memory(),
  // else host memory (the loop stages device gradients through the host).
  virtual void sum(std::span<float> values) = 0;
  virtual void sum(std::span<double> values) = 0;
  virtual bool reduces_device_memory() const { return false; }
};

// A group of one replica: plain single-process training.
class SoloGroup final : public ReplicaGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum(std::span<float>) override {}
  void sum(std::span<double>) override {}
};

// A wider average of each step's gradients than the group's: across sites,
// for data-parallel training. It runs after the group's average and before
// clipping, on host memory, and must leave the same values on every replica
// it spans; values that are not finite there make every replica skip the
// step (as a non-finite gradient does within a group).
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // `step` is the inner step (it varies stochastic rounding, and a resumed
  // run passes the steps it would have passed).
  virtual void sync(std::span<float> grads, std::int64_t step) = 0;
};

enum class InnerOptimizerKind { kAdamW, kMuon };

struct InnerOptimConfig {
  // AdamW on everything, or Muon on the hidden matrices (inner_optimizer.h).
  InnerOptimizerKind kind = InnerOptimizerKind::kAdamW;
  double muon_momentum = 0.95;
  double lr = 4e-4;  // DiLoCo's inner AdamW learning rate
  std::int64_t warmup_steps = 1000;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;  // max global gradient norm; 0 turns clipping off
};

enum class Precision { kFp32, kBf16 };

// Where the inner steps run and in what precision.
struct DeviceConfig {
  bool cuda = false;  // on CUDA device `index`, else the CPU
  int index = 0;
  // bf16: forward passes under autocast in bfloat16; the parameters, the
  // gradients and AdamW's state stay fp32 (master weights).
  Precision precision = Precision::kFp32;
  // Give the outer loop a host copy of the parameters even on the CPU (on
  // CUDA it always gets one), so the staging path can be tested anywhere.
  bool stage_params = false;
};

enum class DeviceSetting { kCpu, kCuda, kAuto };

// The device for this rank: cuda and auto take GPU local_rank % cuda_devices;
// auto falls back to the CPU when there is none. Throws std::invalid_argument
// when cuda is asked for and there is no GPU (or libtorch was built without
// CUDA: then cuda_devices is 0 too).
DeviceConfig choose_device(DeviceSetting setting, int cuda_devices, int local_rank);

// CUDA devices libtorch can use here (0 for a CPU-only libtorch).
int cuda_device_count();

// libtorch's current CUDA stream on `device`, as a cudaStream_t (nullptr
// for a CPU-only libtorch). Code outside libtorch that works on its
// gradients (the NCCL all-reduce) runs on this stream, so it is ordered
// after the kernels that produced them even where a stream guard in
// libtorch made another stream current.
void* current_cuda_stream(int device);

// Total memory of CUDA device `device` in bytes (0 for a CPU-only libtorch).
std::size_t cuda_device_memory(int device);
// The CUDA device's name ("NVIDIA H100 80GB HBM3"); "" for a CPU-only libtorch.
std::string cuda_device_name(int device);

// One forward, backward and AdamW step of a tiny GPT on `device`: libtorch
// starts its thread pools, BLAS buffers and autograd engine lazily, and a
// process's memory before any model is measured after this (the planner's
// runtime), not before.
void warm_up_runtime(const DeviceConfig& device);

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
  // `dataset` must outlive the loop.
  InnerLoop(const ModelConfig& model, const InnerOptimConfig& optim, const DataConfig& data,
            const Dataset& dataset, ShardSpec shard, ReplicaGroup& group, std::uint64_t seed,
            std::int64_t total_steps, const DeviceConfig& device = {});
  ~InnerLoop();
  InnerLoop(const InnerLoop&) = delete;
  InnerLoop& operator=(const InnerLoop&) = delete;

  // Runs `steps` optimizer steps. `on_step(i, loss)` is called after each.
  InnerStats run(int steps, const std::function<void(int, double)>& on_step = {});

  // Sets (or, with nullptr, clears) the gradient sync every step runs after
  // the group's average; it must outlive its use.
  void set_gradient_sync(GradientSync* sync);

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

  // All parameters as one contiguous fp32 host buffer; writes take effect
  // from the next run(), eval_loss() or save. On the CPU it is the model's
  // own memory; on CUDA (or with stage_params) a host copy (pinned when CUDA
  // is available) that is refreshed from the device when the steps since
  // the last call changed it, so the outer state never needs GPU memory.
  // Do not keep the span across run().
  std::span<float> params();
  std::size_t num_params() const;
  // The model's kind and shapes, as checkpoints record them.
  std::string model_signature() const;

  // Replaces the parameters with the tensors of a safetensors file or a
  // model folder (config.json and its safetensors), matched by name (the
  // model's names: Hugging Face's for llama). Throws WeightsError naming the
  // file and what does not fit; nothing is changed then.
  void load_weights(const std::string& path);
  // Names and shapes of the parameters in params() order.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> parameter_shapes() const;
  // Tokens the whole group processes per inner step.
  std::int64_t tokens_per_step() const;
  std::int64_t step() const;  // inner steps taken so far
  // The last step's learning rate and gradient norm (before clipping).
  double last_lr() const;
  double last_grad_norm() const;
  // Moves the step counter (the learning-rate schedule and the data
  // position follow it): a site that joins a run under way takes the run's.
  void set_step(std::int64_t step);

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

// Intra-op threads for this process's tensor math, libtorch's and OpenBLAS's
// where libtorch uses it (one per rank when ranks share cores).
void set_compute_threads(int threads);

// What a process that runs models sets up first: its compute threads (0:
// libtorch's default) and the host block cache as libtorch's CPU allocator
// (host_block_cache.h).
void prepare_host_compute(int threads);

}  // namespace diloco::inner
