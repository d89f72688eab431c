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

Trainer::Trainer(comm::SiteComms& comms, inner::InnerLoop& inner, const OuterParts& parts,
                 const OuterConfig& outer_config, const SyncConfig& sync, const EvalConfig& eval,
                 CheckpointConfig checkpoint, FaultConfig faults)
    : comms_(comms),
      inner_(inner),
      auth_(parts.auth),
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
  const bool data_parallel = sync_.mode == SyncMode::kDataParallel;
  if (data_parallel && (sync_.overlap != OverlapMode::kNone || sync_.schedule_mode != ScheduleMode::kFixed))
    throw std::invalid_argument("data-parallel sync exchanges every step: it takes no overlap and a fixed H");
  if (!comms_.topology.is_leader()) {
    if (data_parallel) install_data_parallel(nullptr);
    return;
  }
  if (!parts.exchange || !parts.optimizer || !comms_.leaders)
    throw std::invalid_argument("a site leader needs exchange and optimizer factories and the leaders communicator");
  // The comm thread gets its own communicator, so its messages never meet the
  // main thread's report gathers.
  const bool overlapped = sync_.overlap != OverlapMode::kNone;
  if (overlapped) {
    exchange_comm_ = comms_.exchange_channel ? std::move(comms_.exchange_channel) : comms_.leaders->duplicate();
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
  if (data_parallel) install_data_parallel(syncs_.front().exchange.get());
}

// Every inner step then averages its gradients over all sites, through the
// leader's exchange (so its codec state is checkpointed with the others).
void Trainer::install_data_parallel(Exchange* exchange) {
  data_parallel_ = std::make_unique<DataParallelSync>(comms_, exchange);
  inner_.set_gradient_sync(data_parallel_.get());
}

Trainer::~Trainer() {
  if (data_parallel_) {
    data_parallel_->set_recovery(nullptr);
    inner_.set_gradient_sync(nullptr);
  }
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
  if (comms_.topology.is_leader() && start_round_ == 0) {
    auto local = inner_.params();
    global_.assign(local.begin(), local.end());
  }
  if (rendezvous_) start_from_group();  // rank 0's state, or the group's current one for a late site
  adopt_global();
  tokens_per_step_ = inner_.tokens_per_step();
  summary.resumed_from = start_round_;
  summary.initial_eval_loss = start_round_ > 0 ? restored_initial_eval_ : inner_.eval_loss(eval_.windows);

  for (int round = start_round_ + 1; round <= outer_config_.rounds; ++round) {
    if (hooks.on_round_start) hooks.on_round_start(round);
    metrics.round = round;
    metrics.H = H_;
    metrics.membership.clear();
    metrics.took_state = round == start_round_ + 1 ? took_state_ : std::nullopt;
    metrics.predicted_comm_share = scheduler_.next().predicted_share;
    const double wall_at_start = metrics.wall_s;
    const double compute_at_start = metrics.compute_s;
    const double exposed_at_start = metrics.exposed_comm_s;
    const bool last = round == outer_config_.rounds;

    RoundSync sync;
    const auto stats = sync_.overlap == OverlapMode::kStreaming ? run_streaming_round(round, hooks, sync)
                                                                : run_steps(round, H_, 0, hooks);
    metrics.compute_s += stats.seconds - collect_data_parallel(sync);
    // Agreed before the exchange, so a delayed exchange can drain into the
    // checkpoint. Every rank meets here after its inner steps, so the time
    // this takes is the wait for the slowest one.
    const auto vote_start = std::chrono::steady_clock::now();
    const bool stop = agree_stop(hooks) && !last;
    wait_this_round_ = seconds_since(vote_start);
    const bool checkpoint_now = !checkpoint_.dir.empty() &&
                                (stop || (checkpoint_.every > 0 && (round % checkpoint_.every == 0 || last)));

    const auto sync_start = std::chrono::steady_clock::now();
    if (comms_.topology.is_leader()) sync_round(stats, round, last, checkpoint_now, sync, metrics);
    comms_.site->wait_for_all();  // the site's other ranks sleep through their leader's exchange
    if (rendezvous_) stay_in_group(round, metrics, summary.initial_eval_loss);  // or checkpoint and stop
    if (!data_parallel_ && (sync_.overlap != OverlapMode::kStreaming || last)) adopt_global();
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
  between_steps_.round = round;  // what an alarm answered between them recovers from
  if (first_step == 0) steps_done_ = 0;
  return inner_.run(steps, [&](int step, double loss) {
    if (first_step + step == H_ / 2) at_phase("inner", round);
    answer_alarm();
    if (hooks.on_step) hooks.on_step(round, first_step + step, loss);
  });
}

inner::InnerStats Trainer::run_streaming_round(int round, const Hooks& hooks, RoundSync& sync) {
  inner::InnerStats total;
  const int F = static_cast<int>(layout_.size());
  const int tau = sync_.overlap_steps;
  int done = 0;
  parts_done_ = 0;
  for (int f = 0; f < F; ++f) {
    const int start = fragment_start_step(f, F, H_, tau);
    accumulate(total, run_steps(round, start - done, done, hooks));
    done = start;
    const bool leader = comms_.topology.is_leader() && minority_.empty();
    if (leader) {
      FragmentSync& frag = syncs_[static_cast<std::size_t>(f)];
      const auto t0 = std::chrono::steady_clock::now();
      // Every fragment has moved for one whole round since its last sync.
      // Between sites launched apart it always goes on the comm thread, so
      // a loss meets the one path that sends it again.
      const SiteUpdate update{static_cast<double>(tokens_per_step_) * H_, H_, total.diverged};
      launch(frag, update, round, static_cast<std::int64_t>(round) * F + f, tau == 0 && !membership_);
      sync.exposed_s += seconds_since(t0);
    }
    accumulate(total, run_steps(round, tau, done, hooks));
    done += tau;
    const auto t0 = std::chrono::steady_clock::now();
    if (leader) finish_fragment(static_cast<std::size_t>(f), round, sync);
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
  if (membership_) f.exchange->set_epoch(membership_->epoch());
  if (overlapped_membership() && !blocking) keep_for_resend(f, seed_round);
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
  resend(f, true);  // marked by a change of membership since it went out
  if (f.in_flight.valid()) {
    const auto t0 = std::chrono::steady_clock::now();
    // The comm thread's own calls are timed; this wait is too, so nothing
    // the main thread waits on another thread for can hang it.
    wait_in_flight(f);
    f.in_flight.get();  // rethrows an exchange error
    sync.blocked_s += seconds_since(t0);
    if (membership_) at_phase("exchanged", between_steps_.round);
  }
  f.resend.reset();  // its result is in
  sync.add(f.stats);
  if (exchange_comm_) exchanged_bytes_ += f.stats.payload_bytes;
  auto global = std::span<float>(global_).subspan(f.span.offset, f.span.count);
  f.outer->step(global, f.delta);
  if (sync_.overlap == OverlapMode::kStreaming) mix_fragment(f);
}

// Streaming: the local slice of f becomes alpha * local + (1 - alpha) * global.
void Trainer::mix_fragment(const FragmentSync& f) {
  auto global = std::span<const float>(global_).subspan(f.span.offset, f.span.count);
  auto local = inner_.params().subspan(f.span.offset, f.span.count);
  const float a = static_cast<float>(sync_.mix_alpha);
  if (a == 0.0f) std::copy(global.begin(), global.end(), local.begin());
  else
    for (std::size_t i = 0; i < local.size(); ++i) local[i] = a * local[i] + (1.0f - a) * global[i];
}

// The leader's part of a round: exchange, outer step, report. Between sites
// launched apart, a loss during it makes the survivors redo it, and sites
// that knocked meanwhile are admitted after it (delayed overlap: after the
// round the last report announced them for, which drains).
void Trainer::sync_round(const inner::InnerStats& stats, int round, bool last, bool checkpoint_now, RoundSync& sync,
                         RoundMetrics& metrics) {
  admitting_now_ = delayed_membership() && admit_next_;  // before this round's report sets the next
  const bool admission = !delayed_membership() || admitting_now_;
  const bool drain = last || checkpoint_now || admitting_now_;
  const auto once = [&] {
    if (data_parallel_) global_.assign(inner_.params().begin(), inner_.params().end());  // one model everywhere
    else if (sync_.overlap == OverlapMode::kNone) sync_blocking(stats, round, sync);
    else if (sync_.overlap == OverlapMode::kDelayed) sync_delayed(stats, round, drain, sync);
    else if (last) std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
    inject_divergence(round);
    report(stats, sync, metrics);
  };
  if (!membership_) return once();
  at_phase("exchange", round);
  for (auto& change : between_steps_.membership) metrics.membership.push_back(std::move(change));
  between_steps_.membership.clear();
  // A survivor that took another's state of this round still sends its
  // own progress of the round (delayed overlap).
  const auto adopted = [&] {
    if (sync_.overlap == OverlapMode::kDelayed) sync_delayed(stats, round, drain, sync, true);
    if (sync_.overlap == OverlapMode::kStreaming && last)
      std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
  };
  redo_on_loss(once, adopted, sync, metrics);
  if (minority_.empty() && !last && admission) admit_newcomers(round, metrics);
  metrics.epoch = membership_->epoch();
  metrics.members = comms_.leaders->size();
  heard_at_ = std::chrono::steady_clock::now();  // it listened throughout; deaf again from here
}

// Test-only: a site leader may be made to fail at a phase of the round.
void Trainer::at_phase(const char* phase, int round) const {
  if (faults_.at_phase && comms_.topology.is_leader()) faults_.at_phase(phase, round);
}

// Test-only: this site's pseudo-gradient becomes NaN in the chosen round.
void Trainer::inject_faults(std::span<float> delta, int round) const {
  if (faults_.nan_site == comms_.topology.site && faults_.nan_round == round && !delta.empty())
    delta[0] = std::numeric_limits<float>::quiet_NaN();
}

// Test-only: this site's global params drift by one ulp in the chosen round.
void Trainer::inject_divergence(int round) {
  if (faults_.diverge_site == comms_.topology.site && faults_.diverge_round == round && !global_.empty())
    global_[0] = std::nextafter(global_[0], std::numeric_limits<float>::infinity());
}

void Trainer::sync_blocking(const inner::InnerStats& stats, int round, RoundSync& sync) {
  FragmentSync& f = syncs_.front();
  launch(f, SiteUpdate{static_cast<double>(stats.tokens), stats.steps, stats.diverged}, round, round, true);
  finish(f, sync);
  std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
}

void Trainer::sync_delayed(const inner::InnerStats& stats, int round, bool drain, RoundSync& sync, bool adopted) {
  FragmentSync& f = syncs_.front();
  auto local = inner_.params();
  if (round_start_.empty()) round_start_ = global_;  // the first round began at the global params
  // This round's own progress, measured from where the round began.
  std::vector<float> own(local.size());
  compute_pseudo_gradient(round_start_, local, own);
  // The previous round's average, applied now (to be sent again first, if
  // the membership changed meanwhile); a site that took the group's state
  // after a loss has it in already.
  if (!adopted && (f.in_flight.valid() || f.resend)) finish(f, sync);
  const SiteUpdate update{static_cast<double>(stats.tokens), stats.steps, stats.diverged};
  inject_faults(own, round);
  if (drain) {
    // Send this round's progress now and end on the global params (the
    // group's state a site adopted holds this round's average already).
    f.delta = std::move(own);
    f.update = update;
    if (!adopted) {
      send(f, round, true);
      finish(f, sync);
    }
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
  comms_.world->wait_for_all();  // the first to finish its steps sleeps until the slowest comes
  comms_.world->all_reduce_sum(std::span<double>(&votes, 1));
  return votes > 0.0;
}

// Data-parallel: this round's per-step exchanges join its sync figures;
// returns the time the inner steps spent in them (communication, not compute).
double Trainer::collect_data_parallel(RoundSync& sync) {
  if (!data_parallel_) return 0.0;
  auto totals = data_parallel_->take();
  for (const auto& e : totals.exchanges) sync.add(e);
  sync.exposed_s += totals.seconds;
  return totals.seconds;
}

// Every rank of the site takes the leader's parameters.
void Trainer::adopt_global() {
  auto local = inner_.params();
  comm::broadcast_values(*comms_.site, local, 0);
}

void Trainer::adopt_fragment(const Fragment& f) {
  comms_.site->wait_for_all();  // the leader may still wait for the fragment's exchange
  comm::broadcast_values(*comms_.site, inner_.params().subspan(f.offset, f.count), 0);
}

}  // namespace diloco::outer
