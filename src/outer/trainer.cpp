// Trainer::run reads top to bottom as the algorithm: inner steps, pseudo-
// gradient, exchange, outer step, adopt, metrics. The overlap modes change
// only where the exchange runs and when its result is merged:
//  - none: after the round's H steps, on the main thread;
//  - delayed (one-step delay, Kale et al. 2025): round r's pseudo-gradient
//    travels on the comm thread while round r+1 computes. At the end of round
//    r+1 the average of round r is applied to the global params, and the site
//    keeps the progress it made meanwhile: local = new global - (its own,
//    not yet averaged, pseudo-gradient of round r+1), which then goes out in
//    turn. The last round, and any round that ends in a checkpoint, drains:
//    its own pseudo-gradient is exchanged at once and local = global.
//  - streaming (Douillard et al. 2025): fragment f starts its exchange tau
//    steps before floor((f+1) H / F) and is merged there by mix_alpha, so all
//    fragments finish within the round and nothing is in flight between rounds.
#include "outer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "outer/clock.h"
#include "outer/pseudo_gradient.h"

namespace diloco::outer {
namespace {

std::vector<Fragment> layout_of(const inner::InnerLoop& inner, const SyncConfig& sync) {
  std::vector<LayerSpan> layers;
  for (const auto& l : inner.layers()) layers.push_back({l.name, l.offset, l.count});
  return split_fragments(layers, sync.overlap == OverlapMode::kStreaming ? sync.fragments : 1);
}

// Adds `more` to `total`, as if one run had taken both.
void accumulate(inner::InnerStats& total, const inner::InnerStats& more) {
  const int steps = total.steps + more.steps;
  if (steps > 0) total.mean_loss = (total.mean_loss * total.steps + more.mean_loss * more.steps) / steps;
  total.steps = steps;
  total.tokens += more.tokens;
  total.seconds += more.seconds;
  total.diverged = total.diverged || more.diverged;
}

}  // namespace

void Trainer::RoundSync::add(const ExchangeStats& s) {
  exchange_s += s.seconds;
  agree_s = agree_s > 0.0 ? std::min(agree_s, s.agree_seconds) : s.agree_seconds;
  peak_bytes = std::max(peak_bytes, s.payload_bytes);
  excluded.insert(excluded.end(), s.excluded.begin(), s.excluded.end());
  // Timing parts add up over the round's exchanges; the report plans from them.
  const ExchangeStats before = last;
  last = s;
  last.seconds += before.seconds;
  last.agree_seconds += before.agree_seconds;
  last.transfer_seconds += before.transfer_seconds;
  last.transfer_messages += before.transfer_messages;
  last.critical_bytes += before.critical_bytes;
}

Trainer::Trainer(comm::SiteComms& comms, inner::InnerLoop& inner, const OuterParts& parts,
                 const OuterConfig& outer_config, const SyncConfig& sync, const EvalConfig& eval,
                 CheckpointConfig checkpoint, FaultConfig faults)
    : comms_(comms),
      inner_(inner),
      outer_config_(outer_config),
      sync_(sync),
      eval_(eval),
      checkpoint_(std::move(checkpoint)),
      faults_(faults),
      layout_(layout_of(inner, sync)),
      scheduler_(sync.schedule(), sync.H),
      H_(sync.H) {
  if (sync_.overlap == OverlapMode::kStreaming && sync_.overlap_steps > sync_.H / sync_.fragments)
    throw std::invalid_argument("sync.overlap_steps (" + std::to_string(sync_.overlap_steps) +
                                ") must be at most sync.H / sync.fragments (" +
                                std::to_string(sync_.H / sync_.fragments) + ") so one fragment is in flight at a time");
  if (!comms_.topology.is_leader()) return;
  if (!parts.exchange || !parts.optimizer || !comms_.leaders)
    throw std::invalid_argument("a site leader needs exchange and optimizer factories and the leaders communicator");
  // The comm thread gets its own communicator, so its messages never meet the
  // main thread's report gathers.
  const bool overlapped = sync_.overlap != OverlapMode::kNone;
  if (overlapped) {
    exchange_comm_ = comms_.leaders->duplicate();
    comm_thread_ = std::make_unique<comm::CommThread>();
  }
  for (const auto& span : layout_) {
    FragmentSync f;
    f.span = span;
    f.exchange = parts.exchange(overlapped ? *exchange_comm_ : *comms_.leaders);
    f.outer = parts.optimizer(span.count);
    f.delta.resize(span.count);
    syncs_.push_back(std::move(f));
  }
}

Trainer::~Trainer() {
  // An exchange still in flight (an error unwound the round) finishes before
  // its buffers go away; the wait is timed like any other.
  comm::Watchdog::Guard guard(comms_.leaders ? comms_.leaders->watchdog() : nullptr, "an exchange in flight (unwinding)");
  for (auto& f : syncs_)
    if (f.in_flight.valid()) f.in_flight.wait();
}

RunSummary Trainer::run(const Hooks& hooks) {
  run_start_ = std::chrono::steady_clock::now();
  RunSummary summary;
  RoundMetrics metrics = restored_;
  const double wall_before = metrics.wall_s;  // time spent before a resume

  // Every rank built the same initial model from the shared seed (or loaded
  // the same checkpoint); the leader still broadcasts so a site never starts
  // from different weights.
  adopt_global();
  if (comms_.topology.is_leader() && start_round_ == 0) {
    auto local = inner_.params();
    global_.assign(local.begin(), local.end());
  }
  tokens_per_step_ = inner_.tokens_per_step();
  summary.resumed_from = start_round_;
  summary.initial_eval_loss = start_round_ > 0 ? restored_initial_eval_ : inner_.eval_loss(eval_.windows);

  for (int round = start_round_ + 1; round <= outer_config_.rounds; ++round) {
    metrics.round = round;
    metrics.H = H_;
    metrics.predicted_comm_share = scheduler_.next().predicted_share;
    const double wall_at_start = metrics.wall_s;
    const double compute_at_start = metrics.compute_s;
    const double exposed_at_start = metrics.exposed_comm_s;
    const bool last = round == outer_config_.rounds;

    RoundSync sync;
    const auto stats = sync_.overlap == OverlapMode::kStreaming ? run_streaming_round(round, hooks, sync)
                                                                : run_steps(round, H_, 0, hooks);
    metrics.compute_s += stats.seconds;
    // Agreed before the exchange, so a delayed exchange can drain into the
    // checkpoint. Every rank meets here after its inner steps, so the time
    // this takes is the wait for the slowest one.
    const auto vote_start = std::chrono::steady_clock::now();
    const bool stop = agree_stop(hooks) && !last;
    wait_this_round_ = seconds_since(vote_start);
    const bool checkpoint_now = !checkpoint_.dir.empty() &&
                                (stop || (checkpoint_.every > 0 && (round % checkpoint_.every == 0 || last)));

    const auto sync_start = std::chrono::steady_clock::now();
    if (comms_.topology.is_leader()) {
      if (sync_.overlap == OverlapMode::kNone) sync_blocking(stats, round, sync);
      else if (sync_.overlap == OverlapMode::kDelayed) sync_delayed(stats, round, last || checkpoint_now, sync);
      else if (last) std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
      report(stats, sync, metrics);
    }
    if (sync_.overlap != OverlapMode::kStreaming || last) adopt_global();
    share_next_H(metrics);
    const double exposed = seconds_since(sync_start) + sync.exposed_s;
    metrics.exposed_comm_s += exposed;
    // Overlapped: the exchanges wherever they ran, plus main-thread sync work
    // other than waiting for them.
    metrics.comm_s += sync_.overlap == OverlapMode::kNone ? exposed : sync.exchange_s + exposed - sync.blocked_s;
    metrics.wait_s += wait_this_round_;
    wait_this_round_ = 0.0;

    metrics.eval_loss.reset();
    if (last || round % eval_.every == 0) metrics.eval_loss = inner_.eval_loss(eval_.windows);
    metrics.wall_s = wall_before + seconds_since(run_start_);
    const double round_s = metrics.wall_s - wall_at_start;
    metrics.comm_share = round_s > 0.0 ? (metrics.exposed_comm_s - exposed_at_start) / round_s : 0.0;
    metrics.utilization = round_s > 0.0 ? (metrics.compute_s - compute_at_start) / round_s : 0.0;
    if (hooks.on_round) hooks.on_round(metrics);

    if (checkpoint_now) save_checkpoint(round, metrics, summary.initial_eval_loss);
    summary.rounds = round;
    if (stop) {
      summary.stopped = true;
      break;
    }
  }

  summary.inner_steps = inner_.step();
  summary.final_eval_loss = metrics.eval_loss.value_or(summary.initial_eval_loss);
  summary.bytes_sent = metrics.bytes_sent;
  summary.wall_s = wall_before + seconds_since(run_start_);
  return summary;
}

inner::InnerStats Trainer::run_steps(int round, int steps, int first_step, const Hooks& hooks) {
  return inner_.run(steps, [&](int step, double loss) {
    if (hooks.on_step) hooks.on_step(round, first_step + step, loss);
  });
}

inner::InnerStats Trainer::run_streaming_round(int round, const Hooks& hooks, RoundSync& sync) {
  inner::InnerStats total;
  const int F = static_cast<int>(layout_.size());
  const int tau = sync_.overlap_steps;
  int done = 0;
  for (int f = 0; f < F; ++f) {
    const int start = fragment_start_step(f, F, H_, tau);
    accumulate(total, run_steps(round, start - done, done, hooks));
    done = start;
    if (comms_.topology.is_leader()) {
      FragmentSync& frag = syncs_[static_cast<std::size_t>(f)];
      const auto t0 = std::chrono::steady_clock::now();
      // Every fragment has moved for one whole round since its last sync.
      const SiteUpdate update{static_cast<double>(tokens_per_step_) * H_, H_, total.diverged};
      launch(frag, update, round, static_cast<std::int64_t>(round) * F + f, tau == 0);
      sync.exposed_s += seconds_since(t0);
    }
    accumulate(total, run_steps(round, tau, done, hooks));
    done += tau;
    const auto t0 = std::chrono::steady_clock::now();
    if (comms_.topology.is_leader()) finish(syncs_[static_cast<std::size_t>(f)], sync);
    adopt_fragment(layout_[static_cast<std::size_t>(f)]);
    sync.exposed_s += seconds_since(t0);
  }
  accumulate(total, run_steps(round, H_ - done, done, hooks));
  return total;
}

void Trainer::launch(FragmentSync& f, const SiteUpdate& update, int round, std::int64_t seed_round, bool blocking) {
  auto local = inner_.params().subspan(f.span.offset, f.span.count);
  auto global = std::span<const float>(global_).subspan(f.span.offset, f.span.count);
  compute_pseudo_gradient(global, local, f.delta);
  inject_faults(f.delta, round);
  f.update = update;
  send(f, seed_round, blocking);
}

// Exchanges f.delta (with f.update): here, or on the comm thread.
void Trainer::send(FragmentSync& f, std::int64_t seed_round, bool blocking) {
  auto job = [this, &f, seed_round] { f.stats = f.exchange->average(f.delta, f.update, seed_round); };
  if (blocking) {
    job();
    return;
  }
  f.in_flight = comm_thread_->submit(job);
}

// Waits for fragment f's exchange, applies the outer step to its global
// slice, and merges the local slice (streaming mixes; other modes decide
// what local becomes themselves).
void Trainer::finish(FragmentSync& f, RoundSync& sync) {
  if (f.in_flight.valid()) {
    const auto t0 = std::chrono::steady_clock::now();
    // The comm thread's own calls are timed; this wait is too, so nothing
    // the main thread waits on another thread for can hang it.
    comm::Watchdog::Guard guard(comms_.leaders->watchdog(), "the exchange in flight on the comm thread");
    f.in_flight.get();  // rethrows an exchange error
    sync.blocked_s += seconds_since(t0);
  }
  sync.add(f.stats);
  if (exchange_comm_) exchanged_bytes_ += f.stats.payload_bytes;
  auto global = std::span<float>(global_).subspan(f.span.offset, f.span.count);
  f.outer->step(global, f.delta);
  if (sync_.overlap != OverlapMode::kStreaming) return;
  auto local = inner_.params().subspan(f.span.offset, f.span.count);
  const float a = static_cast<float>(sync_.mix_alpha);
  if (a == 0.0f) std::copy(global.begin(), global.end(), local.begin());
  else
    for (std::size_t i = 0; i < local.size(); ++i) local[i] = a * local[i] + (1.0f - a) * global[i];
}

// Test-only: this site's pseudo-gradient becomes NaN in the chosen round.
void Trainer::inject_faults(std::span<float> delta, int round) const {
  if (faults_.nan_site == comms_.topology.site && faults_.nan_round == round && !delta.empty())
    delta[0] = std::numeric_limits<float>::quiet_NaN();
}

void Trainer::sync_blocking(const inner::InnerStats& stats, int round, RoundSync& sync) {
  FragmentSync& f = syncs_.front();
  launch(f, SiteUpdate{static_cast<double>(stats.tokens), stats.steps, stats.diverged}, round, round, true);
  finish(f, sync);
  std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
}

void Trainer::sync_delayed(const inner::InnerStats& stats, int round, bool drain, RoundSync& sync) {
  FragmentSync& f = syncs_.front();
  auto local = inner_.params();
  if (round_start_.empty()) round_start_ = global_;  // the first round began at the global params
  // This round's own progress, measured from where the round began.
  std::vector<float> own(local.size());
  compute_pseudo_gradient(round_start_, local, own);
  if (f.in_flight.valid()) finish(f, sync);  // the previous round's average, applied now
  const SiteUpdate update{static_cast<double>(stats.tokens), stats.steps, stats.diverged};
  inject_faults(own, round);
  if (drain) {
    // Send this round's progress now and end on the global params.
    f.delta = std::move(own);
    f.update = update;
    send(f, round, true);
    finish(f, sync);
    std::memcpy(local.data(), global_.data(), global_.size() * sizeof(float));
    round_start_.clear();
    return;
  }
  // Keep the progress: local = global - own, so the average of the round
  // before is in, and this site's own progress since is kept on top of it
  // until the average of this round replaces it. A site whose update is
  // unusable restarts from the global params instead.
  const bool usable = !stats.diverged && compression::all_finite(own);
  for (std::size_t i = 0; i < local.size(); ++i) local[i] = usable ? global_[i] - own[i] : global_[i];
  f.delta = std::move(own);
  f.update = update;
  send(f, round, false);
  round_start_.assign(local.begin(), local.end());
}

bool Trainer::agree_stop(const Hooks& hooks) {
  double votes = hooks.stop_requested && hooks.stop_requested() ? 1.0 : 0.0;
  comms_.world->all_reduce_sum(std::span<double>(&votes, 1));
  return votes > 0.0;
}

// Leaders share what rank 0 reports (loss, tokens, bytes sent so far) and
// what the schedule plans from (step and sync times); every leader sees the
// same reports, so every leader plans the same H.
void Trainer::report(const inner::InnerStats& stats, const RoundSync& sync, RoundMetrics& metrics) {
  const ExchangeStats& exchanged = sync.last;
  metrics.excluded = sync.excluded;
  metrics.excluded_total += static_cast<std::int64_t>(sync.excluded.size());
  metrics.peak_exchange_bytes = sync.peak_bytes;

  comm::Communicator& leaders = *comms_.leaders;
  const bool excluded = std::any_of(metrics.excluded.begin(), metrics.excluded.end(),
                                    [&](const ExcludedSite& e) { return e.site == comms_.topology.site; });
  // The comm thread's counter is not read while it may be counting; its
  // exchanges are added up as they finish instead.
  const auto sent_so_far = leaders.traffic().bytes_sent + exchanged_bytes_;
  SiteReport mine{excluded ? 0.0 : stats.mean_loss,
                  excluded ? 0.0 : static_cast<double>(stats.tokens),
                  static_cast<double>(sent_so_far),
                  stats.steps > 0 ? stats.seconds / stats.steps : 0.0,
                  sync.exchange_s,
                  last_report_s_,
                  sync.agree_s,
                  static_cast<double>(stats.steps),
                  exchanged.transfer_seconds,
                  static_cast<double>(exchanged.transfer_messages),
                  static_cast<double>(exchanged.critical_bytes)};
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
  double quickest_exchange = std::numeric_limits<double>::infinity();
  double quickest_report = std::numeric_limits<double>::infinity();
  double quickest_agree = std::numeric_limits<double>::infinity();
  SiteReport quickest_transfer{};
  quickest_transfer.transfer_s = std::numeric_limits<double>::infinity();
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
    if (r.transfer_s < quickest_transfer.transfer_s) quickest_transfer = r;  // waited least on others
  }
  metrics.step_s = slowest_step;
  metrics.sync_s = quickest_exchange + quickest_report;
  scheduler_.observe(site_step_s, metrics.sync_s);
  const Plan plan = scheduler_.advance();
  H_ = scheduler_.site_H(comms_.topology.site);
  metrics.next_site_H = plan.site_H;
  // Tiny gathers: the last leader to arrive waits for nobody, so the
  // quickest leader's time is one message's latency (plus noise the tracker
  // filters out).
  link_tracker_.observe_latency(quickest_agree);
  link_tracker_.observe_latency(quickest_report);
  link_tracker_.observe_transfer(static_cast<std::size_t>(quickest_transfer.critical_bytes),
                                 static_cast<int>(quickest_transfer.transfer_messages), quickest_transfer.transfer_s);
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

// Every rank of the site takes the leader's parameters.
void Trainer::adopt_global() {
  auto local = inner_.params();
  comm::broadcast_values(*comms_.site, local, 0);
}

void Trainer::adopt_fragment(const Fragment& f) {
  comm::broadcast_values(*comms_.site, inner_.params().subspan(f.offset, f.count), 0);
}

}  // namespace diloco::outer
