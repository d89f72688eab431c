// Ten Muon steps of diloco's inner optimizer on a small GPT, written out for
// tests/inner/muon_reference.py to replay with its own implementation:
// the parameters before, each step's gradients, the parameters after.
// Usage: muon_steps OUT.safetensors [adamw|muon]
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "inner/inner_optimizer.h"
#include "inner/models/model.h"
#include "inner/models/safetensors.h"

namespace di = diloco::inner;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: muon_steps OUT.safetensors adamw|muon\n");
    return 2;
  }
  torch::manual_seed(3);
  di::ModelConfig config;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 2;
  config.seq_len = 16;
  auto model = di::make_model(config);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (auto& [name, p] : model->named_parameters()) named.emplace_back(name, p);

  di::InnerOptimConfig optim;
  optim.kind = std::string(argv[2]) == "muon" ? di::InnerOptimizerKind::kMuon : di::InnerOptimizerKind::kAdamW;
  optim.weight_decay = 0.1;
  di::InnerOptimizer optimizer(optim, named);

  // Every tensor is kept until the file is written (the spans point into them).
  std::vector<torch::Tensor> keep;
  std::vector<di::NamedTensor> out;
  auto record = [&](const std::string& name, const torch::Tensor& t) {
    keep.push_back(t.detach().clone().contiguous());
    const auto& c = keep.back();
    out.push_back({name, c.sizes().vec(), {c.data_ptr<float>(), static_cast<std::size_t>(c.numel())}});
  };
  for (const auto& [name, p] : named) record("before." + name, p);
  constexpr int kSteps = 10;
  for (int step = 0; step < kSteps; ++step) {
    const auto tokens = torch::randint(256, {4, config.seq_len + 1}, torch::kLong);
    for (auto& [name, p] : named)
      if (p.grad().defined()) p.mutable_grad().zero_();
    model->loss(tokens.slice(1, 0, config.seq_len), tokens.slice(1, 1, config.seq_len + 1)).backward();
    for (const auto& [name, p] : named) record("grad" + std::to_string(step) + "." + name, p.grad());
    optimizer.step(0.01 * (step + 1) / kSteps);  // a warm-up, so the rate varies from step to step
  }
  for (const auto& [name, p] : named) record("after." + name, p);
  std::map<std::string, std::string> metadata{{"steps", std::to_string(kSteps)}, {"optimizer", argv[2]}};
  di::write_safetensors(argv[1], out, metadata);
  return 0;
}
