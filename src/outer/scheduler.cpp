// The overhead and time-budget schedules and their running estimates.
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

namespace {

bool usable_step(double s) { return std::isfinite(s) && s > 0.0; }

}  // namespace

void Scheduler::observe(std::span<const double> site_step_s, double sync_s) {
  if (site_step_.size() != site_step_s.size()) site_step_.assign(site_step_s.size(), Ema(config_.ema));
  double slowest = 0.0;
  for (std::size_t s = 0; s < site_step_s.size(); ++s) {
    if (!usable_step(site_step_s[s])) continue;  // a site that ran no step this round
    site_step_[s].add(site_step_s[s]);
    slowest = std::max(slowest, site_step_s[s]);
  }
  if (usable_step(slowest)) step_.add(slowest);
  if (std::isfinite(sync_s) && sync_s >= 0.0) sync_.add(sync_s);
}

double Scheduler::fastest_step() const {
  double fastest = 0.0;
  for (const auto& e : site_step_)
    if (!e.empty() && (fastest == 0.0 || e.value() < fastest)) fastest = e.value();
  return fastest > 0.0 ? fastest : step_.value();
}

double Scheduler::planning_step() const {
  return config_.mode == ScheduleMode::kTimeBudget ? fastest_step() : step_.value();
}

int Scheduler::ideal_H() const {
  if (config_.mode == ScheduleMode::kFixed || step_.empty() || sync_.empty()) return H_;
  const double f = config_.target_comm_share;
  // Blocking: T / (H t + T) <= f. Overlapped: (T - H t) / T <= f.
  const double h = config_.overlapped ? std::ceil(sync_.value() * (1.0 - f) / planning_step())
                                      : std::ceil(sync_.value() * (1.0 - f) / (f * planning_step()));
  return static_cast<int>(std::clamp(h, static_cast<double>(config_.h_min), static_cast<double>(config_.h_max)));
}

// Time-budget: the fastest site runs H steps, the others as many as fit in the
// same time (at least one). Other modes: H everywhere.
std::vector<int> Scheduler::split(int H) const {
  std::vector<int> out(site_step_.size(), H);
  if (config_.mode != ScheduleMode::kTimeBudget) return out;
  const double fastest = fastest_step();
  for (std::size_t s = 0; s < out.size(); ++s) {
    if (site_step_[s].empty() || fastest <= 0.0) continue;
    const double steps = std::round(H * fastest / site_step_[s].value());
    out[s] = static_cast<int>(std::clamp(steps, 1.0, static_cast<double>(H)));
  }
  return out;
}

double Scheduler::share(int H, double step_s, double sync_s) const {
  const double compute = H * step_s;
  if (config_.overlapped) {
    const double round = std::max(compute, sync_s);
    return round > 0.0 ? std::max(0.0, sync_s - compute) / round : 0.0;
  }
  return compute + sync_s > 0.0 ? sync_s / (compute + sync_s) : 0.0;
}

int Scheduler::site_H(int site) const {
  if (site < 0 || static_cast<std::size_t>(site) >= site_H_.size()) return H_;
  return site_H_[static_cast<std::size_t>(site)];
}

Plan Scheduler::next() const {
  Plan p;
  p.H = ideal_H();
  p.site_H = split(p.H);
  p.step_s = planning_step();
  p.sync_s = sync_.value();
  p.predicted_share = share(p.H, p.step_s, p.sync_s);
  return p;
}

Plan Scheduler::advance() {
  Plan p = next();
  // Asymmetric dead band: raise H as soon as the current one would overshoot
  // the target (by 5%), lower it only for a change beyond the hysteresis.
  const double current_share = share(H_, p.step_s, p.sync_s);
  const double change = std::abs(static_cast<double>(p.H - H_)) / static_cast<double>(std::max(H_, 1));
  const bool raise = p.H > H_ && current_share > config_.target_comm_share * 1.05;
  const bool lower = p.H < H_ && change > config_.hysteresis;
  if (config_.mode == ScheduleMode::kFixed || !(raise || lower)) p.H = H_;
  H_ = p.H;
  p.site_H = split(p.H);
  site_H_ = p.site_H;
  p.predicted_share = share(p.H, p.step_s, p.sync_s);
  return p;
}

void Scheduler::forget_sites() {
  site_step_.clear();
  site_H_.clear();
}

// State: H, the slowest-step and sync EMAs, then the site count and each
// site's step EMA (three values per EMA).
std::vector<double> Scheduler::state() const {
  std::vector<double> out{static_cast<double>(H_)};
  auto put = [&](const Ema& e) {
    const auto s = e.state();
    out.insert(out.end(), s.begin(), s.end());
  };
  put(step_);
  put(sync_);
  out.push_back(static_cast<double>(site_step_.size()));
  for (const auto& e : site_step_) put(e);
  return out;
}

void Scheduler::load(const std::vector<double>& state) {
  const auto bad = [&] {
    return std::invalid_argument("scheduler state has " + std::to_string(state.size()) +
                                 " values, which is not 8 + 3 per site");
  };
  if (state.size() < state_values(0)) throw bad();
  const auto sites = static_cast<std::size_t>(state[7]);
  if (state[7] < 0.0 || state.size() != state_values(sites)) throw bad();
  H_ = static_cast<int>(state[0]);
  step_.load({state[1], state[2], state[3]});
  sync_.load({state[4], state[5], state[6]});
  site_step_.assign(sites, Ema(config_.ema));
  for (std::size_t s = 0; s < sites; ++s) site_step_[s].load({state[8 + 3 * s], state[9 + 3 * s], state[10 + 3 * s]});
  site_H_ = split(H_);
}

}  // namespace diloco::outer
