// Trainer::run reads top to bottom as the algorithm: inner steps, pseudo-
// gradient, exchange, outer step, adopt, metrics.
#include "outer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
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
                 const SyncConfig& sync, const EvalConfig& eval)
    : comms_(comms),
      inner_(inner),
      exchange_(std::move(exchange)),
      outer_(std::move(outer)),
      outer_config_(outer_config),
      sync_(sync),
      eval_(eval) {
  if (comms_.topology.is_leader() && (!exchange_ || !outer_ || !comms_.leaders))
    throw std::invalid_argument("a site leader needs an exchange, an outer optimizer and the leaders communicator");
}

RunSummary Trainer::run(const Hooks& hooks) {
  const auto start = std::chrono::steady_clock::now();
  RunSummary summary;
  RoundMetrics metrics;
  metrics.H = sync_.H;

  // Every rank built the same initial model from the shared seed; the leader
  // still broadcasts it so a site can never start from different weights.
  adopt_global();
  if (comms_.topology.is_leader()) {
    auto local = inner_.params();
    global_.assign(local.begin(), local.end());
    delta_.resize(global_.size());
  }
  summary.initial_eval_loss = inner_.eval_loss(eval_.windows);

  for (int round = 1; round <= outer_config_.rounds; ++round) {
    metrics.round = round;
    const auto stats = inner_.run(sync_.H, [&](int step, double loss) {
      if (hooks.on_step) hooks.on_step(round, step, loss);
    });
    metrics.compute_s += stats.seconds;

    const auto comm_start = std::chrono::steady_clock::now();
    if (comms_.topology.is_leader()) outer_step(stats, metrics);
    adopt_global();
    metrics.comm_s += seconds_since(comm_start);

    const bool last = round == outer_config_.rounds;
    metrics.eval_loss.reset();
    if (last || round % eval_.every == 0) metrics.eval_loss = inner_.eval_loss(eval_.windows);
    metrics.wall_s = seconds_since(start);
    if (hooks.on_round) hooks.on_round(metrics);
  }

  summary.rounds = outer_config_.rounds;
  summary.inner_steps = inner_.step();
  summary.final_eval_loss = metrics.eval_loss.value_or(summary.initial_eval_loss);
  summary.bytes_sent = metrics.bytes_sent;
  summary.wall_s = seconds_since(start);
  return summary;
}

void Trainer::outer_step(const inner::InnerStats& stats, RoundMetrics& metrics) {
  auto local = inner_.params();
  compute_pseudo_gradient(global_, local, delta_);
  const auto exchanged = exchange_->average(delta_, static_cast<double>(stats.tokens), metrics.round);
  metrics.excluded_sites = exchanged.excluded_sites;
  outer_->step(global_, delta_);
  std::memcpy(local.data(), global_.data(), global_.size() * sizeof(float));

  // Leaders share what rank 0 reports: loss, tokens and bytes sent so far.
  comm::Communicator& leaders = *comms_.leaders;
  const bool excluded = std::find(metrics.excluded_sites.begin(), metrics.excluded_sites.end(),
                                  comms_.topology.site) != metrics.excluded_sites.end();
  SiteReport mine{excluded ? 0.0 : stats.mean_loss, excluded ? 0.0 : static_cast<double>(stats.tokens),
                  static_cast<double>(leaders.traffic().bytes_sent)};
  auto reports = leaders.all_gather(std::as_bytes(std::span<const SiteReport>(&mine, 1)));
  double loss_weighted = 0.0;
  double tokens = 0.0;
  double bytes = 0.0;
  for (const auto& raw : reports) {
    SiteReport r;
    if (raw.size() != sizeof(SiteReport)) throw std::runtime_error("malformed site report");
    std::memcpy(&r, raw.data(), sizeof(SiteReport));
    loss_weighted += r.mean_loss * r.tokens;
    tokens += r.tokens;
    bytes += r.bytes_sent;
  }
  metrics.train_loss = tokens > 0 ? loss_weighted / tokens : 0.0;
  metrics.tokens += static_cast<std::int64_t>(tokens);
  metrics.bytes_sent = static_cast<std::uint64_t>(bytes);
}

// Every rank of the site takes the leader's parameters (the new global ones).
void Trainer::adopt_global() {
  auto local = inner_.params();
  comm::broadcast_values(*comms_.site, local, 0);
}

}  // namespace diloco::outer
