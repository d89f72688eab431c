// AdamW, or Muon on the hidden matrices and AdamW on the rest.
#include "inner/inner_optimizer.h"

#include "inner/fused_adamw.h"

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
  for (auto& group : adamw_->param_groups()) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    options.lr(lr);
    for (auto& p : group.params())
      if (p.grad().defined()) adamw_step(p, options);
  }
}

// torch::optim::AdamW's step for one parameter, its state kept where that
// optimizer keeps it (so checkpoints are its format); fp32 CPU tensors take
// the single-pass loop, others (CUDA) libtorch's tensor operations.
void InnerOptimizer::adamw_step(torch::Tensor& p, const torch::optim::AdamWOptions& options) {
  torch::NoGradGuard no_grad;
  auto& states = adamw_->state();
  const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());
  auto found = states.find(key);
  if (found == states.end()) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(0);
    state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    found = states.emplace(key, std::move(state)).first;
  }
  auto& state = static_cast<torch::optim::AdamWParamState&>(*found->second);
  state.step(state.step() + 1);
  AdamWScalars s;
  s.lr = options.lr();
  s.beta1 = std::get<0>(options.betas());
  s.beta2 = std::get<1>(options.betas());
  s.eps = options.eps();
  s.weight_decay = options.weight_decay();
  s.bias_correction1 = 1 - std::pow(s.beta1, static_cast<double>(state.step()));
  s.bias_correction2 = 1 - std::pow(s.beta2, static_cast<double>(state.step()));
  const auto& grad = p.grad();
  auto& m = state.exp_avg();
  auto& v = state.exp_avg_sq();
  const bool plain = p.device().is_cpu() && p.scalar_type() == torch::kFloat && grad.scalar_type() == torch::kFloat &&
                     p.is_contiguous() && grad.is_contiguous() && m.is_contiguous() && v.is_contiguous();
  if (plain) {
    fused_adamw(p.data_ptr<float>(), grad.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(),
                static_cast<std::size_t>(p.numel()), s);
    return;
  }
  if (s.weight_decay != 0.0) p.mul_(1 - s.lr * s.weight_decay);
  m.mul_(s.beta1).add_(grad, 1 - s.beta1);
  v.mul_(s.beta2).addcmul_(grad, grad, 1 - s.beta2);
  const auto denom = (v.sqrt() / std::sqrt(s.bias_correction2)).add_(s.eps);
  p.addcdiv_(m, denom, -s.lr / s.bias_correction1);
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
