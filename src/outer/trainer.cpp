// Trainer::run reads top to bottom as the algorithm: inner steps, pseudo-
// gradient, exchange, outer step, adopt, metrics.
#include "outer/trainer.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "outer/pseudo_gradient.h"

namespace diloco::outer {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Trainer::Trainer(comm::SiteComms& comms, inner::InnerLoop& inner, std::unique_ptr<Exchange> exchange,
                 std::unique_ptr<OuterOptimizer> outer, const OuterConfig& outer_config,
                 const SyncConfig& sync, const EvalConfig& eval, CheckpointConfig checkpoint, FaultConfig faults)
    : comms_(comms),
      inner_(inner),
      exchange_(std::move(exchange)),
      outer_(std::move(outer)),
      outer_config_(outer_config),
      sync_(sync),
      eval_(eval),
      checkpoint_(std::move(checkpoint)),
      faults_(faults),
      scheduler_(sync.schedule(), sync.H),
      H_(sync.H) {
  if (comms_.topology.is_leader() && (!exchange_ || !outer_ || !comms_.leaders))
    throw std::invalid_argument("a site leader needs an exchange, an outer optimizer and the leaders communicator");
}

RunSummary Trainer::run(const Hooks& hooks) {
  const auto start = std::chrono::steady_clock::now();
  RunSummary summary;
  RoundMetrics metrics = restored_;
  const double wall_before = metrics.wall_s;  // time spent before a resume

  // Every rank built the same initial model from the shared seed (or loaded
  // the same checkpoint); the leader still broadcasts so a site never starts
  // from different weights.
  adopt_global();
  if (comms_.topology.is_leader()) {
    auto local = inner_.params();
    global_.assign(local.begin(), local.end());
    delta_.resize(global_.size());
  }
  summary.resumed_from = start_round_;
  summary.initial_eval_loss = start_round_ > 0 ? restored_initial_eval_ : inner_.eval_loss(eval_.windows);

  for (int round = start_round_ + 1; round <= outer_config_.rounds; ++round) {
    metrics.round = round;
    metrics.H = H_;
    metrics.predicted_comm_share = scheduler_.next().predicted_share;
    const double wall_at_start = metrics.wall_s;
    const double comm_at_start = metrics.comm_s;
    const auto stats = inner_.run(H_, [&](int step, double loss) {
      if (hooks.on_step) hooks.on_step(round, step, loss);
    });
    metrics.compute_s += stats.seconds;

    const auto comm_start = std::chrono::steady_clock::now();
    if (comms_.topology.is_leader()) outer_step(stats, metrics);
    adopt_global();
    share_next_H(metrics);
    metrics.comm_s += seconds_since(comm_start) - wait_this_round_;
    metrics.wait_s += wait_this_round_;
    wait_this_round_ = 0.0;

    const bool last = round == outer_config_.rounds;
    metrics.eval_loss.reset();
    if (last || round % eval_.every == 0) metrics.eval_loss = inner_.eval_loss(eval_.windows);
    metrics.wall_s = wall_before + seconds_since(start);
    const double round_s = metrics.wall_s - wall_at_start;
    metrics.comm_share = round_s > 0.0 ? (metrics.comm_s - comm_at_start) / round_s : 0.0;
    if (hooks.on_round) hooks.on_round(metrics);

    const bool stop = !last && agree_stop(hooks);
    const bool due = checkpoint_.every > 0 && (round % checkpoint_.every == 0 || last);
    if (!checkpoint_.dir.empty() && (due || stop)) save_checkpoint(round, metrics, summary.initial_eval_loss);
    summary.rounds = round;
    if (stop) {
      summary.stopped = true;
      break;
    }
  }

  summary.inner_steps = inner_.step();
  summary.final_eval_loss = metrics.eval_loss.value_or(summary.initial_eval_loss);
  summary.bytes_sent = metrics.bytes_sent;
  summary.wall_s = wall_before + seconds_since(start);
  return summary;
}

bool Trainer::agree_stop(const Hooks& hooks) {
  double votes = hooks.stop_requested && hooks.stop_requested() ? 1.0 : 0.0;
  comms_.world->all_reduce_sum(std::span<double>(&votes, 1));
  return votes > 0.0;
}

void Trainer::outer_step(const inner::InnerStats& stats, RoundMetrics& metrics) {
  auto local = inner_.params();
  compute_pseudo_gradient(global_, local, delta_);
  if (faults_.nan_site == comms_.topology.site && faults_.nan_round == metrics.round && !delta_.empty())
    delta_[0] = std::numeric_limits<float>::quiet_NaN();
  const auto exchanged =
      exchange_->average(delta_, SiteUpdate{static_cast<double>(stats.tokens), stats.steps, stats.diverged}, metrics.round);
  metrics.excluded = exchanged.excluded;
  metrics.excluded_total += static_cast<std::int64_t>(exchanged.excluded.size());
  outer_->step(global_, delta_);
  std::memcpy(local.data(), global_.data(), global_.size() * sizeof(float));

  // Leaders share what rank 0 reports: loss, tokens and bytes sent so far.
  comm::Communicator& leaders = *comms_.leaders;
  const bool excluded = std::any_of(metrics.excluded.begin(), metrics.excluded.end(),
                                    [&](const ExcludedSite& e) { return e.site == comms_.topology.site; });
  SiteReport mine{excluded ? 0.0 : stats.mean_loss, excluded ? 0.0 : static_cast<double>(stats.tokens),
                  static_cast<double>(leaders.traffic().bytes_sent),
                  stats.steps > 0 ? stats.seconds / stats.steps : 0.0, exchanged.seconds, last_report_s_,
                  exchanged.agree_seconds, static_cast<double>(stats.steps), exchanged.transfer_seconds,
                  static_cast<double>(exchanged.transfer_messages), static_cast<double>(exchanged.critical_bytes)};
  const auto before_report = leaders.traffic().bytes_sent;
  const auto report_start = std::chrono::steady_clock::now();
  auto reports = leaders.all_gather(std::as_bytes(std::span<const SiteReport>(&mine, 1)));
  last_report_s_ = seconds_since(report_start);
  // Every leader sends the same-sized report, so this one's cost times the
  // number of sites completes the count (and a resumed run counts the same).
  const double report_bytes = static_cast<double>(leaders.traffic().bytes_sent - before_report) *
                              static_cast<double>(reports.size());
  double loss_weighted = 0.0;
  double tokens = 0.0;
  double bytes = 0.0;
  double slowest_step = 0.0;
  auto& site_step_s = metrics.site_step_s;
  site_step_s.clear();
  metrics.site_steps.clear();
  const SiteReport* quickest_transfer = nullptr;
  double quickest_exchange = std::numeric_limits<double>::infinity();
  double quickest_report = std::numeric_limits<double>::infinity();
  double quickest_agree = std::numeric_limits<double>::infinity();
  for (const auto& raw : reports) {
    SiteReport r;
    if (raw.size() != sizeof(SiteReport)) throw std::runtime_error("malformed site report");
    std::memcpy(&r, raw.data(), sizeof(SiteReport));
    loss_weighted += r.mean_loss * r.tokens;
    tokens += r.tokens;
    bytes += r.bytes_sent;
    slowest_step = std::max(slowest_step, r.step_s);
    site_step_s.push_back(r.step_s);
    metrics.site_steps.push_back(static_cast<int>(r.steps));
    // The last site to arrive waits for nobody: its time is the sync itself.
    quickest_exchange = std::min(quickest_exchange, r.exchange_s);
    // This gather's own cost is only known afterwards; the last round's stands in.
    quickest_report = std::min(quickest_report, r.report_s);
    quickest_agree = std::min(quickest_agree, r.agree_s);
  }
  for (const auto& raw : reports) {  // the leader whose transfers waited least on others
    const auto* r = reinterpret_cast<const SiteReport*>(raw.data());
    if (!quickest_transfer || r->transfer_s < quickest_transfer->transfer_s) quickest_transfer = r;
  }
  // What this site spent waiting for the last one to arrive.
  wait_this_round_ = std::max(0.0, exchanged.agree_seconds - quickest_agree);
  // Every leader saw the same reports, so every leader plans the same H.
  metrics.step_s = slowest_step;
  metrics.sync_s = quickest_exchange + quickest_report;
  scheduler_.observe(site_step_s, metrics.sync_s);
  const Plan plan = scheduler_.advance();
  H_ = scheduler_.site_H(comms_.topology.site);
  metrics.next_site_H = plan.site_H;
  // The report gather ran with every leader in step: its time is a latency.
  if (quickest_report > 0.0 && std::isfinite(quickest_report)) link_tracker_.observe_latency(quickest_report);
  link_tracker_.observe_transfer(static_cast<std::size_t>(quickest_transfer->critical_bytes),
                                 static_cast<int>(quickest_transfer->transfer_messages), quickest_transfer->transfer_s);
  if (link_tracker_.known()) metrics.link = link_tracker_.estimate();
  metrics.train_loss = tokens > 0 ? loss_weighted / tokens : 0.0;
  metrics.tokens += static_cast<std::int64_t>(tokens);
  metrics.bytes_sent = restored_.bytes_sent + static_cast<std::uint64_t>(bytes + report_bytes);
  reprobe(metrics);
}

// Every sync.reprobe_every rounds the leaders measure every pair actively;
// the passive estimate restarts from the slowest pair.
void Trainer::reprobe(RoundMetrics& metrics) {
  metrics.probed.clear();
  if (sync_.reprobe_every <= 0 || metrics.round % sync_.reprobe_every != 0 || comms_.leaders->size() < 2) return;
  // Its bytes count in the next round's total (the traffic counters are cumulative).
  metrics.probed = comm::probe_links(*comms_.leaders);
  link_tracker_.seed(bottleneck(metrics.probed));
  metrics.link = link_tracker_.estimate();
}

// The leader tells its site the H it planned for the next round.
void Trainer::share_next_H(RoundMetrics& metrics) {
  std::int64_t h = H_;
  comm::broadcast_values(*comms_.site, std::span<std::int64_t>(&h, 1), 0);
  H_ = static_cast<int>(h);
  metrics.next_H = H_;
}

// Every rank of the site takes the leader's parameters (the new global ones).
void Trainer::adopt_global() {
  auto local = inner_.params();
  comm::broadcast_values(*comms_.site, local, 0);
}

}  // namespace diloco::outer
