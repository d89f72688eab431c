// The overhead schedule and its running estimates.
#include "outer/scheduler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace diloco::outer {

void Ema::add(double x) {
  raw_ = weight_ * x + (1.0 - weight_) * raw_;
  decay_ *= 1.0 - weight_;
  ++count_;
}

void Ema::load(const std::vector<double>& s) {
  raw_ = s.at(0);
  decay_ = s.at(1);
  count_ = static_cast<int>(s.at(2));
}

double Ema::value() const { return count_ == 0 ? 0.0 : raw_ / (1.0 - decay_); }

Scheduler::Scheduler(const ScheduleConfig& config, int initial_H)
    : config_(config), H_(initial_H), step_(config.ema), sync_(config.ema) {}

void Scheduler::observe(double slowest_step_s, double sync_s) {
  if (std::isfinite(slowest_step_s) && slowest_step_s > 0.0) step_.add(slowest_step_s);
  if (std::isfinite(sync_s) && sync_s >= 0.0) sync_.add(sync_s);
}

int Scheduler::ideal_H() const {
  if (config_.mode == ScheduleMode::kFixed || step_.empty() || sync_.empty()) return H_;
  const double f = config_.target_comm_share;
  const double h = std::ceil(sync_.value() * (1.0 - f) / (f * step_.value()));
  return static_cast<int>(std::clamp(h, static_cast<double>(config_.h_min), static_cast<double>(config_.h_max)));
}

Plan Scheduler::next() const {
  Plan p;
  p.H = ideal_H();
  p.step_s = step_.value();
  p.sync_s = sync_.value();
  const double round_s = p.H * p.step_s + p.sync_s;
  p.predicted_share = round_s > 0.0 ? p.sync_s / round_s : 0.0;
  return p;
}

Plan Scheduler::advance() {
  Plan p = next();
  // Asymmetric dead band: raise H as soon as the current one would overshoot
  // the target (by 5%), lower it only for a change beyond the hysteresis.
  const double current_round = H_ * p.step_s + p.sync_s;
  const double current_share = current_round > 0.0 ? p.sync_s / current_round : 0.0;
  const double change = std::abs(static_cast<double>(p.H - H_)) / static_cast<double>(std::max(H_, 1));
  const bool raise = p.H > H_ && current_share > config_.target_comm_share * 1.05;
  const bool lower = p.H < H_ && change > config_.hysteresis;
  if (config_.mode == ScheduleMode::kFixed || !(raise || lower)) p.H = H_;
  H_ = p.H;
  const double round_s = p.H * p.step_s + p.sync_s;
  p.predicted_share = round_s > 0.0 ? p.sync_s / round_s : 0.0;
  return p;
}

}  // namespace diloco::outer

namespace diloco::outer {

std::vector<double> Scheduler::state() const {
  std::vector<double> out{static_cast<double>(H_)};
  for (const auto& e : {step_, sync_}) {
    const auto s = e.state();
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

void Scheduler::load(const std::vector<double>& state) {
  if (state.size() != 7) throw std::invalid_argument("scheduler state has " + std::to_string(state.size()) + " values, expected 7");
  H_ = static_cast<int>(state[0]);
  step_.load({state[1], state[2], state[3]});
  sync_.load({state[4], state[5], state[6]});
}

}  // namespace diloco::outer
