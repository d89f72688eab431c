// Link-aware choice of the sync period H. From what the last rounds measured
// (each site's inner-step time and the time one sync took), predict the
// communication share of a round and pick H so it stays near a target:
// blocking round T(H) = H * t_step(slowest) + T_sync, share f = T_sync / T(H),
// so f <= target needs H >= T_sync (1 - target) / (target * t_step).
// In time-budget mode the fastest site's H follows that rule and every other
// site runs H_i = H * t_fast / t_i steps, so all reach the exchange together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace diloco::outer {

enum class ScheduleMode {
  kFixed,     // H = sync.H every round
  kOverhead,  // smallest H in [h_min, h_max] whose predicted share <= target
  kTimeBudget,  // overhead's H for the fastest site, H_i proportional to speed
};

struct ScheduleConfig {
  ScheduleMode mode = ScheduleMode::kFixed;
  int h_min = 1;
  int h_max = 100000;
  double target_comm_share = 0.05;
  // H is lowered only when the new value is more than this fraction below the
  // current one (raised as soon as the current H overshoots the target by
  // 5%), so noise in the measurements does not make H flap.
  double hysteresis = 0.2;
  double ema = 0.7;  // weight of the newest measurement: react within a round or two
  // The exchange overlaps the next round's compute (one-step delay): only
  // what H * t_step does not hide is exposed, so the share of a round is
  // max(0, T_sync - H t) / max(H t, T_sync), and full hiding needs H t >= T_sync.
  bool overlapped = false;
};

// Bias-corrected exponential moving average: e = a x + (1 - a) e, reported as
// e / (1 - (1 - a)^k) so the first values are not pulled towards zero.
class Ema {
 public:
  explicit Ema(double weight) : weight_(weight) {}
  void add(double x);
  double value() const;
  bool empty() const { return count_ == 0; }

  // The raw state, for checkpoints (exact resume).
  std::vector<double> state() const { return {raw_, decay_, static_cast<double>(count_)}; }
  void load(const std::vector<double>& s);

 private:
  double weight_;
  double raw_ = 0.0;
  double decay_ = 1.0;  // (1 - a)^k
  int count_ = 0;
};

struct Plan {
  int H = 1;                     // the fastest site's (every site's, outside time-budget)
  std::vector<int> site_H;       // per site; empty before any measurement
  double predicted_share = 0.0;  // for the round about to run
  double step_s = 0.0;           // estimated slowest inner step
  double sync_s = 0.0;           // estimated sync time
};

class Scheduler {
 public:
  Scheduler(const ScheduleConfig& config, int initial_H);

  // Feeds one finished round: each site's mean inner-step time and the
  // measured sync time (exchange, outer step, adoption). Every site leader
  // passes the same values (gathered), so all reach the same plan.
  void observe(std::span<const double> site_step_s, double sync_s);
  void observe(double slowest_step_s, double sync_s) { observe(std::span<const double>(&slowest_step_s, 1), sync_s); }

  // H for the next round.
  Plan next() const;
  int current_H() const { return H_; }
  // Steps `site` runs next round (H outside time-budget mode).
  int site_H(int site) const;
  // Adopts next().H, honouring the hysteresis; returns the plan used.
  Plan advance();

  // Sites launched apart, after a membership change: the per-site history
  // (indexed by the leaders' ranks, which changed meaning) starts over, and
  // every site runs H until the next plan.
  void forget_sites();

  std::vector<double> state() const;
  // How many values state() has with this many sites' history: 8 + 3 per site.
  static std::size_t state_values(std::size_t sites) { return 8 + 3 * sites; }
  void load(const std::vector<double>& state);  // throws std::invalid_argument

 private:
  int ideal_H() const;
  double share(int H, double step_s, double sync_s) const;  // predicted communication share
  std::vector<int> split(int H) const;
  double fastest_step() const;
  // The step time the H rule plans with: the slowest site's, or in
  // time-budget mode the fastest's (the others run proportionally fewer steps).
  double planning_step() const;

  ScheduleConfig config_;
  int H_;
  std::vector<int> site_H_;
  Ema step_;  // slowest site's step
  Ema sync_;
  std::vector<Ema> site_step_;
};

}  // namespace diloco::outer
