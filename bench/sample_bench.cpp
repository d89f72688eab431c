// Sampling speed: each new token through the key/value cache (one position
// per token) against recomputing the whole sequence for every token, on the
// same model, prompt and seed, in one process; alternating repeats, medians,
// and the ratio. Both must produce the same ids (greedy), which is checked.
//
//   bench_sample [--model llama|gpt] [--d-model N] [--layers N] [--heads N] [--kv-heads N]
//                [--prompt N] [--tokens N] [--repeats N] [--threads N] [--device cpu|cuda]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "inner/inner_loop.h"
#include "inner/models/model.h"
#include "inner/sampler.h"
#include "median.h"

using namespace diloco::inner;

namespace {

struct Options {
  std::string model = "llama", device = "cpu";
  int d_model = 256, layers = 4, heads = 8, kv_heads = 2, prompt = 16, tokens = 256, repeats = 3, threads = 1;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_sample: %s\n", problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string v = argv[++i];
    if (flag == "--model") o.model = v;
    else if (flag == "--device") o.device = v;
    else if (flag == "--d-model") o.d_model = std::stoi(v);
    else if (flag == "--layers") o.layers = std::stoi(v);
    else if (flag == "--heads") o.heads = std::stoi(v);
    else if (flag == "--kv-heads") o.kv_heads = std::stoi(v);
    else if (flag == "--prompt") o.prompt = std::stoi(v);
    else if (flag == "--tokens") o.tokens = std::stoi(v);
    else if (flag == "--repeats") o.repeats = std::stoi(v);
    else if (flag == "--threads") o.threads = std::stoi(v);
    else usage("unknown flag " + flag);
  }
  if (o.model != "llama" && o.model != "gpt") usage("--model must be llama or gpt");
  return o;
}

using diloco::bench::median;

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  prepare_host_compute(o.threads);
  const torch::Device device = o.device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  ModelConfig c;
  c.kind = o.model == "llama" ? ModelKind::kLlama : ModelKind::kGpt;
  c.d_model = o.d_model;
  c.n_layers = o.layers;
  c.n_heads = o.heads;
  c.n_kv_heads = c.kind == ModelKind::kLlama ? o.kv_heads : 0;
  c.seq_len = o.prompt + o.tokens;  // the whole sample fits: no sliding window in either
  torch::manual_seed(0);
  auto model = make_model(c);
  model->to(device);
  std::vector<std::int64_t> prompt;
  for (int i = 0; i < o.prompt; ++i) prompt.push_back(32 + (i * 37) % 90);
  SampleOptions s;
  s.tokens = o.tokens;
  s.temperature = 0.0;
  std::vector<double> cached_s, full_s;
  std::vector<std::int64_t> cached_ids, full_ids;
  sample(*model, prompt, s, device);  // warm-up
  for (int r = 0; r < o.repeats; ++r) {
    for (bool cached : {true, false}) {
      s.use_cache = cached;
      const auto t0 = std::chrono::steady_clock::now();
      auto ids = sample(*model, prompt, s, device);
      if (device.is_cuda()) torch::cuda::synchronize();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (cached ? cached_s : full_s).push_back(dt);
      (cached ? cached_ids : full_ids) = std::move(ids);
    }
  }
  const bool same = cached_ids == full_ids;
  const double tc = median(cached_s), tf = median(full_s);
  std::printf("# sampling %d tokens after a %d-token prompt, %s d_model=%d layers=%d heads=%d kv_heads=%d, %s, %d thread%s\n",
              o.tokens, o.prompt, o.model.c_str(), o.d_model, o.layers, o.heads, c.kind == ModelKind::kLlama ? o.kv_heads : o.heads,
              o.device.c_str(), o.threads, o.threads == 1 ? "" : "s");
  std::printf("%-26s %10s %12s %10s\n", "method", "time (s)", "tokens/s", "speedup");
  std::printf("%-26s %10.3f %12.1f %10.2f\n", "recompute every token", tf, o.tokens / tf, 1.0);
  std::printf("%-26s %10.3f %12.1f %10.2f\n", "kv cache", tc, o.tokens / tc, tf / tc);
  std::printf("same greedy ids: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
