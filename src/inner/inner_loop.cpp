// Inner loop: flat parameter and gradient buffers, one all-reduce per step.
#include "inner/inner_loop.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "inner/autocast.h"
#include "inner/host_block_cache.h"
#include "inner/inner_optimizer.h"
#include "inner/models/model.h"
#include "inner/models/weights.h"
#include "inner/lr_schedule.h"

namespace diloco::inner {

DeviceConfig choose_device(DeviceSetting setting, int cuda_devices, int local_rank) {
  DeviceConfig device;
  if (setting == DeviceSetting::kCpu) return device;
  if (cuda_devices <= 0) {
    if (setting == DeviceSetting::kAuto) return device;
    throw std::invalid_argument(
        "run.device = \"cuda\" but there is no CUDA device here" +
        std::string(torch::cuda::is_available() ? "" : " (or this libtorch was built without CUDA)") +
        "; use \"cpu\" or \"auto\"");
  }
  device.cuda = true;
  device.index = std::max(local_rank, 0) % cuda_devices;
  return device;
}

int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

struct InnerLoop::Impl {
  Impl(const ModelConfig& model_config, const InnerOptimConfig& optim_config, const DataConfig& data,
       const Dataset& dataset, ShardSpec shard, ReplicaGroup& g, std::uint64_t seed,
       std::int64_t total_steps, const DeviceConfig& device_config)
      : device_config(device_config),
        device(device_config.cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_config.index))
                                  : torch::Device(torch::kCPU)),
        group(g),
        sampler(dataset, data, shard, model_config.seq_len, model_config.vocab, seed),
        optim(optim_config),
        schedule{optim_config.lr, optim_config.warmup_steps, total_steps, optim_config.min_lr_ratio} {
    torch::manual_seed(seed);
    model = make_model(model_config);  // initialized on the CPU, so every device starts from the same weights
    model->to(device);
    flatten();
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (auto& [name, p] : model->named_parameters()) named.emplace_back(name, p);
    optimizer = std::make_unique<InnerOptimizer>(optim, named);
  }

  // Re-homes every parameter and gradient as a view into one flat buffer, so
  // the outer loop and the all-reduce see contiguous memory without copies.
  // The gradient buffer has one extra slot that carries the step's loss
  // through the same all-reduce.
  void flatten() {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> params;
    for (auto& named : model->named_parameters()) params.push_back(named.second);
    std::int64_t total = 0;
    for (auto& p : params) total += p.numel();
    const auto on_device = torch::TensorOptions().dtype(torch::kFloat).device(device);
    flat_params = torch::empty({total}, on_device);
    flat_grads = torch::zeros({total + 1}, on_device);
    std::int64_t offset = 0;
    for (auto& p : params) {
      const auto n = p.numel();
      auto param_view = flat_params.narrow(0, offset, n);
      param_view.copy_(p.detach().reshape({-1}));
      p.set_data(param_view.view(p.sizes()));
      p.mutable_grad() = flat_grads.narrow(0, offset, n).view(p.sizes());
      offset += n;
    }
    num_params = static_cast<std::size_t>(total);
    if (device.is_cuda() || device_config.stage_params) host_params = torch::empty({total}, pinned_host());
    // Only where the group reduces host memory; a gradient sync allocates its own when set.
    if (device.is_cuda() && !group.reduces_device_memory()) host_grads = torch::empty({total + 1}, pinned_host());
  }

  // The host copy of the parameters (staged runs): brought up to date before
  // the outer loop reads it, written back before the model next uses it.
  void pull_params() {
    if (!host_params.defined() || host_current) return;
    host_params.copy_(flat_params);
    host_current = true;
  }
  void push_params() {
    if (!host_params.defined() || !host_written) return;
    flat_params.copy_(host_params, /*non_blocking=*/true);  // ordered before the next kernels on the stream
    host_written = false;
  }

  // The group sums `flat_grads` (gradients and the loss slot) in place; on
  // CUDA with a host-memory group, through the pinned host copy.
  void sum_grads() {
    if (device.is_cuda() && !group.reduces_device_memory()) {
      host_grads.copy_(flat_grads);
      group.sum(std::span<float>(host_grads.data_ptr<float>(), num_params + 1));
      flat_grads.copy_(host_grads, /*non_blocking=*/true);
    } else {
      group.sum(std::span<float>(flat_grads.data_ptr<float>(), num_params + 1));
    }
  }

  // The wider average, on host memory. A replica whose loss is not finite
  // says so through its gradients, so every replica of the sync skips alike.
  void sync_wider(torch::Tensor grads, bool loss_finite) {
    if (!loss_finite) grads[0].fill_(std::numeric_limits<float>::quiet_NaN());
    if (!device.is_cuda()) {
      gradient_sync->sync(std::span<float>(grads.data_ptr<float>(), num_params), step);
      return;
    }
    if (!host_grads.defined()) host_grads = torch::empty({flat_grads.numel()}, pinned_host());
    auto host = host_grads.narrow(0, 0, static_cast<std::int64_t>(num_params));
    host.copy_(grads);
    gradient_sync->sync(std::span<float>(host.data_ptr<float>(), num_params), step);
    grads.copy_(host, /*non_blocking=*/true);
  }

  static torch::TensorOptions pinned_host() {
    return torch::TensorOptions().dtype(torch::kFloat).pinned_memory(torch::cuda::is_available());
  }

  // Forward passes run inside this scope (bf16 autocast, or nothing).
  AutocastScope autocast() const {
    return AutocastScope(device_config.precision == Precision::kBf16, device_config.cuda);
  }

  torch::Tensor tokens_on_device(std::int64_t* data, std::int64_t rows, std::int64_t cols) {
    auto tokens = torch::from_blob(data, {rows, cols}, torch::kLong);
    return device.is_cuda() ? tokens.to(device) : tokens;
  }

  // Returns the step's mean loss over the group; a non-finite loss or
  // gradient skips the update (the caller stops the round).
  double train_step() {
    sampler.train_batch(step, batch);
    const auto B = sampler.batch_size();
    const auto T = sampler.seq_len();
    auto tokens = tokens_on_device(batch.data(), B, T + 1);
    auto inputs = tokens.slice(1, 0, T);
    auto targets = tokens.slice(1, 1, T + 1);

    flat_grads.zero_();
    torch::Tensor loss;
    {
      const auto scope = autocast();
      loss = model->loss(inputs, targets);
    }
    loss.backward();

    // The loss rides in the gradient buffer's last slot through the same all-reduce.
    flat_grads.narrow(0, static_cast<std::int64_t>(num_params), 1).copy_(loss.detach().to(torch::kFloat).reshape({1}));
    if (group.size() > 1) {
      sum_grads();
      flat_grads.div_(static_cast<float>(group.size()));
    }
    const double mean_loss = flat_grads[static_cast<std::int64_t>(num_params)].item<double>();
    auto grads = flat_grads.narrow(0, 0, static_cast<std::int64_t>(num_params));
    if (gradient_sync) sync_wider(grads, std::isfinite(mean_loss));
    const double norm = grads.norm().item<double>();
    last_norm = norm;
    // Every replica sees the same averaged values, so all skip together.
    if (!std::isfinite(mean_loss) || !std::isfinite(norm)) {
      ++step;  // the next attempt draws the next batch
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (optim.grad_clip > 0.0 && norm > optim.grad_clip) grads.mul_(optim.grad_clip / (norm + 1e-6));
    const double lr = schedule.at(step);
    last_lr = lr;
    optimizer->step(lr);
    ++step;
    return mean_loss;
  }

  DeviceConfig device_config;
  torch::Device device;
  ReplicaGroup& group;
  BatchSampler sampler;
  InnerOptimConfig optim;
  LrSchedule schedule;
  std::unique_ptr<Model> model;
  torch::Tensor flat_params;
  torch::Tensor flat_grads;
  std::size_t num_params = 0;
  std::unique_ptr<InnerOptimizer> optimizer;
  std::vector<std::int64_t> batch;
  std::int64_t step = 0;
  double last_lr = 0.0;
  double last_norm = 0.0;
  double slowdown = 1.0;
  torch::Tensor host_params;  // staged runs only
  torch::Tensor host_grads;   // CUDA with a host-memory group or a gradient sync only
  GradientSync* gradient_sync = nullptr;
  bool host_current = false;  // host_params equals the model's parameters
  bool host_written = false;  // host_params was handed out since the last push
};

InnerLoop::InnerLoop(const ModelConfig& model, const InnerOptimConfig& optim, const DataConfig& data,
                     const Dataset& dataset, ShardSpec shard, ReplicaGroup& group, std::uint64_t seed,
                     std::int64_t total_steps, const DeviceConfig& device)
    : impl_(std::make_unique<Impl>(model, optim, data, dataset, shard, group, seed, total_steps, device)) {}

InnerLoop::~InnerLoop() = default;

InnerStats InnerLoop::run(int steps, const std::function<void(int, double)>& on_step) {
  const auto start = std::chrono::steady_clock::now();
  InnerStats stats;
  double loss_sum = 0.0;
  impl_->model->train(true);
  impl_->push_params();
  if (steps > 0) impl_->host_current = false;
  for (int i = 0; i < steps; ++i) {
    const auto step_start = std::chrono::steady_clock::now();
    const double loss = impl_->train_step();
    if (impl_->slowdown > 1.0)
      std::this_thread::sleep_for((std::chrono::steady_clock::now() - step_start) * (impl_->slowdown - 1.0));
    if (!std::isfinite(loss)) {
      stats.diverged = true;
      break;
    }
    loss_sum += loss;
    ++stats.steps;
    if (on_step) on_step(i, loss);
  }
  stats.mean_loss = stats.steps > 0 ? loss_sum / stats.steps : 0.0;
  stats.tokens = static_cast<std::int64_t>(stats.steps) * tokens_per_step();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

double InnerLoop::eval_loss(int windows) {
  torch::NoGradGuard no_grad;
  impl_->push_params();
  impl_->model->train(false);
  auto tokens_vec = impl_->sampler.eval_windows(windows);
  const auto T = impl_->sampler.seq_len();
  const std::int64_t mine = static_cast<std::int64_t>(tokens_vec.size()) / (T + 1);
  double totals[2] = {0.0, 0.0};  // summed loss, windows
  constexpr std::int64_t kChunk = 32;
  const auto scope = impl_->autocast();
  for (std::int64_t first = 0; first < mine; first += kChunk) {
    const auto n = std::min(kChunk, mine - first);
    auto tokens = impl_->tokens_on_device(tokens_vec.data() + first * (T + 1), n, T + 1);
    auto loss = impl_->model->loss(tokens.slice(1, 0, T), tokens.slice(1, 1, T + 1));
    totals[0] += loss.item<double>() * static_cast<double>(n);
    totals[1] += static_cast<double>(n);
  }
  impl_->group.sum(std::span<double>(totals, 2));
  impl_->model->train(true);
  return totals[1] > 0 ? totals[0] / totals[1] : std::nan("");
}

std::span<float> InnerLoop::params() {
  if (!impl_->host_params.defined()) return {impl_->flat_params.data_ptr<float>(), impl_->num_params};
  impl_->pull_params();
  impl_->host_written = true;
  return {impl_->host_params.data_ptr<float>(), impl_->num_params};
}

std::vector<InnerLoop::Layer> InnerLoop::layers() const {
  std::vector<Layer> out;
  std::size_t offset = 0;
  for (const auto& [name, p] : impl_->model->named_parameters()) {
    const std::string layer = impl_->model->layer_of(name);
    const auto count = static_cast<std::size_t>(p.numel());
    if (out.empty() || out.back().name != layer) out.push_back({layer, offset, 0});
    out.back().count += count;
    offset += count;
  }
  return out;
}

void InnerLoop::set_gradient_sync(GradientSync* sync) { impl_->gradient_sync = sync; }

void InnerLoop::set_slowdown(double factor) { impl_->slowdown = factor; }

double InnerLoop::last_lr() const { return impl_->last_lr; }
double InnerLoop::last_grad_norm() const { return impl_->last_norm; }

std::int64_t InnerLoop::tokens_per_step() const {
  return static_cast<std::int64_t>(impl_->sampler.batch_size()) * impl_->sampler.seq_len() * impl_->group.size();
}

std::size_t InnerLoop::num_params() const { return impl_->num_params; }

std::string InnerLoop::model_signature() const { return impl_->model->signature(); }

void InnerLoop::load_weights(const std::string& path) {
  impl_->push_params();  // a host copy handed out earlier is not written back over the loaded weights
  inner::load_weights(*impl_->model, path);
  impl_->host_current = false;
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> InnerLoop::parameter_shapes() const {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& p : parameter_layout(*impl_->model)) out.emplace_back(p.name, p.shape);
  return out;
}

std::int64_t InnerLoop::step() const { return impl_->step; }

void InnerLoop::set_step(std::int64_t step) {
  if (step < 0) throw std::invalid_argument("an inner step counter cannot be negative");
  impl_->step = step;
}

std::string InnerLoop::save_state() const {
  torch::serialize::OutputArchive archive;
  impl_->optimizer->save(archive);
  archive.write("step", torch::tensor(static_cast<std::int64_t>(impl_->step)));
  archive.write("num_params", torch::tensor(static_cast<std::int64_t>(impl_->num_params)));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void InnerLoop::load_state(const std::string& bytes) {
  try {
    torch::serialize::InputArchive archive;
    std::istringstream in(bytes);
    archive.load_from(in, impl_->device);  // AdamW's moments live where the parameters do
    torch::Tensor step;
    torch::Tensor count;
    archive.read("num_params", count);
    if (count.item<std::int64_t>() != static_cast<std::int64_t>(impl_->num_params))
      throw std::runtime_error("inner state is for " + std::to_string(count.item<std::int64_t>()) +
                               " parameters, this model has " + std::to_string(impl_->num_params));
    archive.read("step", step);
    impl_->optimizer->load(archive);
    impl_->step = step.item<std::int64_t>();
  } catch (const c10::Error& e) {
    throw std::runtime_error(std::string("inner optimizer state does not fit this model: ") + e.what_without_backtrace());
  }
}

}  // namespace diloco::inner

namespace diloco::inner {

void set_compute_threads(int threads) {
  torch::set_num_threads(threads);
  // libtorch's setting does not reach an OpenBLAS built with its own
  // threads (Debian's libopenblas0-pthread): without OMP_NUM_THREADS or
  // OPENBLAS_NUM_THREADS, every rank's matrix products would take every
  // core. Found at run time: libtorch may be linked with another BLAS.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

void prepare_host_compute(int threads) {
  if (threads > 0) set_compute_threads(threads);
  use_host_block_cache();
}

void warm_up_runtime(const DeviceConfig& device) {
  ModelConfig tiny;
  tiny.d_model = 16;
  tiny.n_layers = 1;
  tiny.n_heads = 2;
  tiny.seq_len = 8;
  auto model = make_model(tiny);
  const torch::Device where = device.cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device.index))
                                          : torch::Device(torch::kCPU);
  model->to(where);
  std::vector<torch::Tensor> params;
  for (auto& [name, p] : model->named_parameters()) params.push_back(p);
  torch::optim::AdamW adamw(params);
  const auto tokens = torch::randint(tiny.vocab, {2, tiny.seq_len + 1}, torch::TensorOptions().dtype(torch::kLong).device(where));
  model->loss(tokens.slice(1, 0, tiny.seq_len), tokens.slice(1, 1, tiny.seq_len + 1)).backward();
  adamw.step();
}

}  // namespace diloco::inner
