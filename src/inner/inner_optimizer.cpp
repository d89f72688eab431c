// AdamW, or Muon on the hidden matrices and AdamW on the rest.
#include "inner/inner_optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace diloco::inner {

namespace {

// What a checkpoint's inner state records as its optimizer (absent: AdamW,
// as written before Muon existed).
constexpr const char* kKindKey = "inner_optimizer";

const char* kind_name(std::int64_t kind) { return kind == 1 ? "muon" : "adamw"; }

}  // namespace

torch::Tensor newton_schulz5(const torch::Tensor& g) {
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = g.size(0) > g.size(1);
  auto x = tall ? g.t() : g;
  x = x / (x.norm() + 1e-7);
  for (int i = 0; i < 5; ++i) {
    const auto A = torch::mm(x, x.t());
    const auto B = torch::addmm(A, A, A, /*beta=*/b, /*alpha=*/c);  // b A + c A A
    x = torch::addmm(x, B, x, /*beta=*/a, /*alpha=*/1.0);           // a X + B X
  }
  return tall ? x.t() : x;
}

bool muon_trains(const std::string& name, const torch::Tensor& p) {
  if (p.dim() != 2) return false;
  const bool head = name == "lm_head.weight" || name.ends_with(".lm_head.weight") || name.starts_with("head.") ||
                    name.find(".head.") != std::string::npos;
  return name.find("embed") == std::string::npos && !head;
}

InnerOptimizer::InnerOptimizer(const InnerOptimConfig& config,
                               const std::vector<std::pair<std::string, torch::Tensor>>& params)
    : config_(config) {
  const bool muon = config.kind == InnerOptimizerKind::kMuon;
  std::vector<torch::Tensor> decayed;
  std::vector<torch::Tensor> plain;
  // AdamW decays matrices only; gains, biases and embeddings' rows stay free
  // of it except the (tied) token embedding, which is a matrix.
  for (const auto& [name, p] : params) {
    if (muon && muon_trains(name, p)) {
      const double scale = 0.2 * std::sqrt(static_cast<double>(std::max(p.size(0), p.size(1))));
      muon_.push_back({p, torch::zeros_like(p), scale});
    } else {
      (p.dim() >= 2 ? decayed : plain).push_back(p);
    }
  }
  auto options = torch::optim::AdamWOptions(config.lr)
                     .betas({config.beta1, config.beta2})
                     .weight_decay(config.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
  auto no_decay = options;
  no_decay.weight_decay(0.0);
  groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(no_decay));
  adamw_ = std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

void InnerOptimizer::step(double lr) {
  {
    torch::NoGradGuard no_grad;
    const double mu = config_.muon_momentum;
    for (auto& m : muon_) {
      const auto& g = m.param.grad();
      m.momentum.mul_(mu).add_(g);
      const auto orthogonal = newton_schulz5(g.add(m.momentum, mu));
      if (config_.weight_decay > 0.0) m.param.mul_(1.0 - lr * config_.weight_decay);
      m.param.add_(orthogonal, -lr * m.scale);
    }
  }
  for (auto& group : adamw_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  adamw_->step();
}

void InnerOptimizer::save(torch::serialize::OutputArchive& archive) const {
  adamw_->save(archive);
  const bool muon = config_.kind == InnerOptimizerKind::kMuon;
  archive.write(kKindKey, torch::tensor(static_cast<std::int64_t>(muon ? 1 : 0)));
  for (std::size_t i = 0; i < muon_.size(); ++i) archive.write("muon_momentum_" + std::to_string(i), muon_[i].momentum);
}

void InnerOptimizer::load(torch::serialize::InputArchive& archive) {
  torch::Tensor kind;
  const std::int64_t saved = archive.try_read(kKindKey, kind) ? kind.item<std::int64_t>() : 0;
  const std::int64_t mine = config_.kind == InnerOptimizerKind::kMuon ? 1 : 0;
  if (saved != mine)
    throw std::runtime_error(std::string("inner optimizer state was saved with inner.optimizer = \"") +
                             kind_name(saved) + "\"; this run uses \"" + kind_name(mine) + "\"");
  std::vector<torch::Tensor> momenta(muon_.size());
  for (std::size_t i = 0; i < muon_.size(); ++i) {
    archive.read("muon_momentum_" + std::to_string(i), momenta[i]);
    if (!momenta[i].sizes().equals(muon_[i].momentum.sizes()))
      throw std::runtime_error("inner optimizer state: Muon momentum " + std::to_string(i) +
                               " does not fit this model's matrix");
  }
  adamw_->load(archive);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < muon_.size(); ++i) muon_[i].momentum.copy_(momenta[i]);
}

}  // namespace diloco::inner
