// Inner-loop throughput: diloco's InnerLoop (one replica, no exchange)
// against a minimal hand-written libtorch loop on the same model, batch,
// optimizer and thread count, in one process. The two run in alternating
// blocks so drift in the machine's speed hits both alike; the table gives
// each one's median step time and the ratio.
//
//   bench_inner [--device cpu|cuda] [--model gpt|llama|torchscript] [--path FILE]
//               [--d-model N] [--layers N] [--heads N] [--kv-heads N]
//               [--seq-len N] [--batch N] [--steps N] [--blocks N] [--threads N]
//               [--precision fp32|bf16] [--only diloco|raw] [--profile FILE]
//               [--optimizer adamw|muon]
// --path: the TorchScript file (scripts/export_model.py) for --model torchscript.
// --optimizer muon: the InnerLoop steps with Muon (the raw loop keeps
// AdamW), so the ratio is Muon's step time against AdamW's.
// --only runs one side (for peak memory, read from getrusage at the end).
// --profile writes a Chrome trace of --steps more InnerLoop steps, after the
// timed ones, from libtorch's autograd profiler (bench/profile_step.py reads it).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "inner/autocast.h"
#include "inner/models/model.h"
#include "inner/data/memory_tokens.h"
#include "inner/data/token_shards.h"
#include "inner/inner_loop.h"
#include "synthetic_corpus.h"
#include "median.h"

using namespace diloco::inner;

namespace {

struct Options {
  std::string device = "cpu";
  std::string model = "gpt";
  std::string path;
  int d_model = 128, layers = 2, heads = 4, kv_heads = 0, seq_len = 64, batch = 16;
  int steps = 20, blocks = 5, threads = 1;
  std::string precision = "fp32";
  std::string only;
  std::string profile;
  std::string optimizer = "adamw";
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_inner: %s\n", problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string v = argv[++i];
    auto number = [&] {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n <= 0) usage(flag + " needs a positive integer (got '" + v + "')");
      return static_cast<int>(n);
    };
    if (flag == "--device") o.device = v;
    else if (flag == "--model") o.model = v;
    else if (flag == "--path") o.path = v;
    else if (flag == "--kv-heads") o.kv_heads = number();
    else if (flag == "--d-model") o.d_model = number();
    else if (flag == "--layers") o.layers = number();
    else if (flag == "--heads") o.heads = number();
    else if (flag == "--seq-len") o.seq_len = number();
    else if (flag == "--batch") o.batch = number();
    else if (flag == "--steps") o.steps = number();
    else if (flag == "--blocks") o.blocks = number();
    else if (flag == "--threads") o.threads = number();
    else if (flag == "--precision") o.precision = v;
    else if (flag == "--only") o.only = v;
    else if (flag == "--profile") o.profile = v;
    else if (flag == "--optimizer") o.optimizer = v;
    else usage("unknown flag " + flag);
  }
  if (o.device != "cpu" && o.device != "cuda") usage("--device must be cpu or cuda");
  if (o.optimizer != "adamw" && o.optimizer != "muon") usage("--optimizer must be adamw or muon");
  if (o.precision != "fp32" && o.precision != "bf16") usage("--precision must be fp32 or bf16");
  if (!o.only.empty() && o.only != "diloco" && o.only != "raw") usage("--only must be diloco or raw");
  if (!o.profile.empty() && o.only == "raw") usage("--profile traces the InnerLoop: not with --only raw");
  if (o.d_model % o.heads) usage("--heads must divide --d-model");
  if (o.model != "gpt" && o.model != "llama" && o.model != "torchscript") usage("--model must be gpt, llama or torchscript");
  if ((o.model == "torchscript") != !o.path.empty()) usage("--path goes with --model torchscript, and only with it");
  return o;
}

using diloco::bench::median;

// The hand-written loop: the same model and AdamW, clipping, random batches.
struct RawLoop {
  RawLoop(const ModelConfig& config, const InnerOptimConfig& optim, torch::Device device, int batch, bool bf16)
      : device(device), batch(batch), seq_len(config.seq_len), bf16(bf16) {
    torch::manual_seed(1);
    model = make_model(config);
    model->to(device);
    for (auto& named : model->named_parameters()) params.push_back(named.second);
    optimizer = std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(optim.lr).betas({optim.beta1, optim.beta2}).weight_decay(optim.weight_decay));
  }
  void step() {
    auto tokens = torch::randint(0, 256, {batch, seq_len + 1}, torch::TensorOptions().dtype(torch::kLong).device(device));
    optimizer->zero_grad();
    torch::Tensor loss;
    {
      AutocastScope autocast(bf16, device.is_cuda());
      loss = model->loss(tokens.slice(1, 0, seq_len), tokens.slice(1, 1, seq_len + 1));
    }
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    optimizer->step();
    last_loss = loss.item<double>();
  }
  torch::Device device;
  int batch;
  int seq_len;
  bool bf16;
  std::unique_ptr<Model> model;
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  double last_loss = 0.0;
};

// The data loader alone at the same batch shape: the BatchSampler over a
// llm.c shard (8 Mi ids, read with pread, warm page cache), ids checked, as the
// inner loop draws them. Returns tokens/s counted as the steps count them.
double loader_tokens_per_s(const Options& o) {
  const std::string path = "/tmp/bench_inner_loader_" + std::to_string(::getpid()) + ".bin";
  std::vector<std::uint32_t> ids(std::size_t{8} << 20);
  std::uint64_t x = 88172645463325252ull;
  for (auto& id : ids) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    id = static_cast<std::uint32_t>(x % 4096);
  }
  write_token_shard(path, ids);
  DataConfig c;
  c.format = DataFormat::kTokens;
  c.paths = {path};
  c.batch_size = o.batch;
  const Dataset d = open_dataset(c, 4096, static_cast<std::uint64_t>(o.seq_len) + 2);
  std::remove(path.c_str());  // the open descriptor keeps the file until the Dataset goes
  BatchSampler sampler(d, c, {}, o.seq_len, 4096, 1);
  std::vector<std::int64_t> batch;
  for (int i = 0; i < 100; ++i) sampler.train_batch(i, batch);
  std::vector<double> per_batch;
  for (int block = 0; block < 5; ++block) {
    const int n = 2000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sampler.train_batch(block * n + i, batch);
    per_batch.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  return static_cast<double>(o.batch) * o.seq_len / median(per_batch);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  prepare_host_compute(o.threads);
  const bool cuda = o.device == "cuda";
  if (cuda && cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_inner: --device cuda but libtorch sees no CUDA device\n");
    return 2;
  }
  ModelConfig model;
  model.kind = o.model == "llama" ? ModelKind::kLlama : o.model == "torchscript" ? ModelKind::kTorchScript : ModelKind::kGpt;
  model.path = o.path;
  model.n_kv_heads = o.kv_heads;
  model.d_model = o.d_model;
  model.n_layers = o.layers;
  model.n_heads = o.heads;
  model.seq_len = o.seq_len;
  InnerOptimConfig optim;
  optim.warmup_steps = 10;
  optim.kind = o.optimizer == "muon" ? InnerOptimizerKind::kMuon : InnerOptimizerKind::kAdamW;
  DataConfig data;
  data.batch_size = o.batch;
  DeviceConfig device;
  device.cuda = cuda;
  device.precision = o.precision == "bf16" ? Precision::kBf16 : Precision::kFp32;
  const auto corpus = diloco::bench::synthetic_corpus(std::size_t{4} << 20);
  SoloGroup group;
  const bool run_diloco = o.only != "raw";
  const bool run_raw = o.only != "diloco";
  std::unique_ptr<InnerLoop> loop;
  std::unique_ptr<RawLoop> raw;
  if (run_diloco) loop = std::make_unique<InnerLoop>(model, optim, data, corpus, ShardSpec{}, group, 1, 1 << 20, device);
  if (run_raw)
    raw = std::make_unique<RawLoop>(model, optim, torch::Device(cuda ? torch::kCUDA : torch::kCPU), o.batch,
                                    o.precision == "bf16");
  auto sync = [&] {
    if (cuda) torch::cuda::synchronize();
  };
  // Warm-up: allocator, kernels, caches.
  if (loop) loop->run(3);
  if (raw)
    for (int i = 0; i < 3; ++i) raw->step();
  sync();
  std::vector<double> diloco_s, raw_s;
  for (int b = 0; b < o.blocks; ++b) {
    if (loop) {
      const auto t0 = std::chrono::steady_clock::now();
      loop->run(o.steps);
      sync();
      diloco_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.steps);
    }
    if (raw) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.steps; ++i) raw->step();
      sync();
      raw_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.steps);
    }
  }
  if (loop && !o.profile.empty()) {
    torch::autograd::profiler::RecordProfile trace(o.profile);
    loop->run(o.steps);
    sync();
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::int64_t params = 0;
  if (loop) params = static_cast<std::int64_t>(loop->num_params());
  else
    for (auto& p : raw->params) params += p.numel();
  const double tokens = static_cast<double>(o.batch) * o.seq_len;
  std::printf("| loop | model | device | precision | params | ms/step (median of %d blocks of %d) | tokens/s |\n",
              o.blocks, o.steps);
  std::printf("|---|---|---|---|---:|---:|---:|\n");
  auto row = [&](const char* name, const std::vector<double>& s) {
    std::printf("| %s | %s | %s | %s | %.2fM | %.2f | %.0f |\n", name, o.model.c_str(), o.device.c_str(),
                o.precision.c_str(), static_cast<double>(params) / 1e6, 1e3 * median(s), tokens / median(s));
  };
  if (loop) row(o.optimizer == "muon" ? "diloco InnerLoop, Muon" : "diloco InnerLoop", diloco_s);
  if (raw) row("raw libtorch", raw_s);
  const double loader = loader_tokens_per_s(o);
  std::printf("| loader: BatchSampler over an llm.c shard | - | cpu | - | - | %.4f | %.0f |\n",
              1e3 * tokens / loader, loader);
  if (loop && raw)
    std::printf(o.optimizer == "muon" ? "\nMuon / AdamW step time: %.3f\n" : "\ndiloco / raw step time: %.3f\n",
                median(diloco_s) / median(raw_s));
  if (loop) std::printf("loader / InnerLoop tokens/s: %.0fx\n", loader * median(diloco_s) / tokens);
  std::printf("peak RSS: %.1f MB\n", static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
}
