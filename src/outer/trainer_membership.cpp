// The trainer between sites launched apart: where a round begins, how a
// round survives a lost site, and how newcomers catch up. The membership
// (comm::Membership) decides who is in; this file keeps the training state
// consistent with it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "outer/clock.h"
#include "outer/group_state.h"
#include "outer/trainer.h"

namespace diloco::outer {
namespace {

constexpr int kStateTag = 9201;

}  // namespace

void Trainer::use_membership(comm::Membership* leader_membership) {
  if (data_parallel_ && sync_.H >= comm::Membership::kMaxParts)
    throw std::invalid_argument("data parallelism between sites launched apart counts a round's steps as its "
                                "progress: sync.H must be below " + std::to_string(comm::Membership::kMaxParts));
  if (comms_.topology.is_leader() && !leader_membership)
    throw std::invalid_argument("a site leader needs the membership");
  // The comm thread's channel must be the membership's, remade with it.
  if (comms_.topology.is_leader() && exchange_comm_ && !leader_membership->exchange_channel())
    throw std::invalid_argument("an overlapped exchange between sites launched apart needs the membership's "
                                "exchange channel (comm::JoinConfig::exchange_channel)");
  rendezvous_ = true;
  membership_ = comms_.topology.is_leader() ? leader_membership : nullptr;
  use_step_recovery();
}

// What a site needs to train on from here (group_state.h): the round, the
// global params, every fragment's outer optimizer state (every member holds
// them alike), the sender's inner step (the LR schedule's and the data's
// position), the H schedule's state (so every member plans the same H), and
// with data parallelism, which applies every step on every site, the inner
// optimizer's state (DiLoCo's stays each site's own).
std::vector<std::byte> Trainer::group_state(int round) const {
  GroupState s;
  s.round = round;
  s.inner_step = inner_.step();
  s.admit_next = admit_next_;
  for (const auto& f : syncs_) {
    s.started.push_back(f.outer->started());
    s.outer.emplace_back(f.outer->state().begin(), f.outer->state().end());
  }
  s.global = global_;
  s.schedule = scheduler_.state();
  if (data_parallel_) s.inner = inner_.save_state();
  return encode_group_state(s);
}

GroupStateShape Trainer::group_state_shape() const {
  GroupStateShape shape;
  shape.params = global_.size();
  for (const auto& f : syncs_) shape.outer_values.push_back(f.outer->state().size());
  shape.data_parallel = data_parallel_ != nullptr;
  shape.min_schedule_values = Scheduler::state_values(0);
  shape.max_schedule_values = Scheduler::state_values(static_cast<std::size_t>(comms_.topology.num_sites));
  return shape;
}

// Takes a state group_state() wrote, once all of it checked out; returns
// its round. `take_step`: the site also takes the sender's inner step
// counter (it joins a run under way). `keep_local`: the local params stay
// (overlapped: a site behind mixes in the fragment it missed, or measures
// its own progress of the round from them); else they become the global
// ones.
int Trainer::load_group_state(std::span<const std::byte> bytes, bool take_step, bool keep_local) {
  GroupState s = decode_group_state(bytes, group_state_shape());
  if (!s.inner.empty()) {
    try {
      inner_.load_state(s.inner);
    } catch (const std::exception& e) {
      throw comm::CommError(std::string("the group's inner optimizer state: ") + e.what(), -1);
    }
  }
  try {
    scheduler_.load(s.schedule);
  } catch (const std::invalid_argument& e) {
    throw comm::CommError(std::string("the group's state: ") + e.what(), -1);
  }
  global_ = std::move(s.global);
  for (std::size_t i = 0; i < syncs_.size(); ++i) syncs_[i].outer->load_state(s.outer[i], s.started[i]);
  // Its per-site history is of the sender's ranks: until the next plan every site runs H.
  scheduler_.forget_sites();
  H_ = scheduler_.current_H();
  admit_next_ = s.admit_next;
  if (!keep_local) std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
  if (take_step) inner_.set_step(s.inner_step);
  return static_cast<int>(s.round);
}

void Trainer::send_group_state(int round, const std::vector<int>& to) {
  auto state = group_state(round);
  seal(state, sealing_context("state", 0, comms_.leaders->rank()));
  for (int r : to) {
    comms_.leaders->send(std::span<const std::byte>(state).first(group_state_header_bytes()), r, kStateTag);
    comms_.leaders->send(std::span<const std::byte>(state).subspan(group_state_header_bytes()), r, kStateTag + 1);
  }
}

int Trainer::receive_group_state(int from, bool take_step, bool keep_local) {
  std::vector<std::byte> state(group_state_header_bytes());
  comms_.leaders->recv(state, from, kStateTag);
  state.resize(group_state_bytes(state, group_state_shape()) + (auth_ ? sizeof(comm::MacTag) : 0));
  comms_.leaders->recv(std::span<std::byte>(state).subspan(group_state_header_bytes()), from, kStateTag + 1);
  if (!unseal(state, sealing_context("state", 0, from)))
    throw comm::CommError("the group's state from site rank " + std::to_string(from) +
                              " failed its key check (tampered on the way?)",
                          from);
  return load_group_state(state, take_step, keep_local);
}

// Round 1 (or a resumed run) starts from rank 0's state on every member; a
// site admitted later receives the group's state from rank 0 when it is
// admitted. Either way the site takes rank 0's step counter, and the site's
// ranks then learn the round to go on from and the step.
void Trainer::start_from_group() {
  std::int64_t position[3] = {start_round_, inner_.step(), H_};
  if (membership_) {
    comm::Communicator& leaders = *comms_.leaders;
    if (membership_->joined_late()) {
      position[0] = receive_group_state(0, true, false);
      // Its residual held back progress of the local params it now leaves
      // for the group's: sending it later would add progress nobody kept.
      RoundMetrics::TookState took{position[0]};
      double squares = 0.0;
      for (auto& f : syncs_) {
        for (float v : f.exchange->residual()) squares += static_cast<double>(v) * v;
        took.residual_before += f.exchange->residual().size();
        f.exchange->set_residual({});
        took.residual_after += f.exchange->residual().size();
      }
      if (took.residual_before > 0) took.residual_rms_before = std::sqrt(squares / static_cast<double>(took.residual_before));
      took_state_ = took;
    } else {
      auto state = group_state(start_round_);
      if (leaders.rank() == 0) seal(state, sealing_context("state", 0, 0));
      std::uint64_t size = state.size();
      comm::broadcast_values(leaders, std::span<std::uint64_t>(&size, 1), 0);
      state.resize(size);
      leaders.broadcast(state, 0);
      if (!unseal(state, sealing_context("state", 0, 0)))
        throw comm::CommError("the group's starting state failed its key check (tampered on the way?)", 0);
      position[0] = load_group_state(state, true, false);
    }
    position[1] = inner_.step();
    position[2] = H_;
    membership_->set_admitted(position[0]);  // nobody is admitted before the first round ends
    heard_at_ = std::chrono::steady_clock::now();  // deaf from here to its first step (the first evaluation)
  }
  comm::broadcast_values(*comms_.site, std::span<std::int64_t>(position, 3), 0);
  start_round_ = static_cast<int>(position[0]);
  inner_.set_step(position[1]);
  H_ = static_cast<int>(position[2]);
}

// The round's exchange, outer step and report, redone from the round's
// starting state by the survivors whenever a member is lost during it; a
// survivor behind one that completed it takes that one's result instead
// (keeping the error-feedback residual its sent payload left), then does
// what is left of its round (`adopted`). Delayed overlap: the exchange
// that was in flight when the round began is restored with it, to be sent
// again; while it is in flight its residual is the comm thread's, so the
// one it went out with stands for it.
void Trainer::redo_on_loss(const std::function<void()>& once, const std::function<void()>& adopted, RoundSync& sync,
                           RoundMetrics& metrics) {
  FragmentSync& f = syncs_.front();
  const std::vector<float> global = global_;
  const auto local_span = inner_.params();
  const std::vector<float> local(local_span.begin(), local_span.end());
  const std::vector<float> round_start = round_start_;
  const std::vector<float> outer_state(f.outer->state().begin(), f.outer->state().end());
  const bool outer_started = f.outer->started();
  const auto resend = f.resend;
  std::vector<float> residual;
  if (!f.in_flight.valid()) residual.assign(f.exchange->residual().begin(), f.exchange->residual().end());
  const RoundMetrics before = metrics;
  const auto restore = [&] {
    global_ = global;
    std::memcpy(inner_.params().data(), local.data(), local.size() * sizeof(float));
    round_start_ = round_start;
    f.outer->load_state(outer_state, outer_started);
    f.resend = resend;
    if (f.resend) f.resend->again = true;
    f.exchange->set_residual(f.resend ? f.resend->residual : residual);
    auto events = std::move(metrics.membership);
    metrics = before;
    metrics.membership = std::move(events);
    sync = RoundSync{};
  };
  while (minority_.empty()) {
    try {
      once();
      membership_->set_completed_round(metrics.round);
      return;
    } catch (const comm::PeerLost& lost) {
      quiesce();
      // This round's own exchange went out on the comm thread: its residual
      // before it, since it goes out again from there.
      const bool sent_now = f.resend && f.resend->seed_round == metrics.round;
      const auto now = sent_now ? std::span<const float>(f.resend->residual) : f.exchange->residual();
      const std::vector<float> sent_residual(now.begin(), now.end());
      restore();
      if (recover_or_stop(lost.what(), metrics) == AfterLoss::kAdopted) {
        f.resend.reset();  // the state it took has that exchange's result
        f.exchange->set_residual(sent_residual);
        adopted();
        return;
      }
    }
  }
}

// Agrees on the survivors and settles the round (another loss meanwhile
// starts over); kStop (and minority_ set) when this site is not among a
// majority.
Trainer::AfterLoss Trainer::recover_or_stop(std::string why, RoundMetrics& metrics) {
  at_phase("recovery", metrics.round);
  quiesce();  // the comm thread lets go of the channel the membership remakes
  for (;;) {
    try {
      auto change = membership_->recover(why);
      metrics.membership.push_back(change);
      if (change.admission_done) admitted_round_ = change.agreed_round;
      return settle(change) ? AfterLoss::kAdopted : AfterLoss::kRedo;
    } catch (const comm::PeerLost& lost) {
      why = lost.what();
    } catch (const comm::MinorityError& e) {
      minority_ = e.what();
      return AfterLoss::kStop;
    }
  }
}

// After a recovery every survivor goes on from the newest round any of
// them completed: one behind takes the state of the one that holds it
// (true), and that one sends it.
bool Trainer::settle(const comm::MembershipChange& change) {
  // Data parallelism inside a round: the agreed step's average is all a
  // site behind needs (its gradient sync applies it and says so).
  const bool step = data_parallel_ && change.agreed_parts > 0;
  if (step) {
    if (change.behind) receive_step_average(change.state_from);
    else if (comms_.leaders->rank() == change.state_from && !change.behind_ranks.empty())
      send_step_average(change.behind_ranks);
    return change.behind;
  }
  if (change.behind) {
    // Overlapped, the local params stay: streaming mixes in the fragments
    // it missed; delayed measures its own progress of the round from them
    // (sync_delayed, adopted) and keeps it on top of the group's params.
    const bool streaming = sync_.overlap == OverlapMode::kStreaming;
    receive_group_state(change.state_from, false, sync_.overlap != OverlapMode::kNone);
    if (change.agreed_parts > 0) membership_->set_parts_done(change.agreed_round, change.agreed_parts);
    else if (change.admission_done) membership_->set_admitted(change.agreed_round);
    else membership_->set_completed_round(change.agreed_round);
    if (streaming) take_missed_fragments(change);
    return true;
  }
  if (comms_.leaders->rank() == change.state_from && !change.behind_ranks.empty())
    send_group_state(static_cast<int>(change.agreed_round), change.behind_ranks);
  return false;
}

// Between inner steps a leader answers another's alarm at once, so being
// a round ahead never counts as being lost. It has completed every round
// the group may agree on, so it is never behind.
// The time since it last could answer counts towards its longest.
void Trainer::answer_alarm() {
  if (!membership_ || !minority_.empty()) return;
  busy_s_ = std::max(busy_s_, seconds_since(heard_at_));
  heard_at_ = std::chrono::steady_clock::now();
  if (!membership_->alarmed()) return;
  // Only streaming can be behind here: its fragment in flight was applied
  // elsewhere (and now here, from the group's state).
  if (recover_or_stop("an alarm between inner steps", between_steps_) == AfterLoss::kAdopted &&
      sync_.overlap != OverlapMode::kStreaming)
    throw comm::CommError("a site between its inner steps was behind the group's round (a protocol error)", -1);
  // Its exchange in flight goes out again over the survivors, still behind
  // the inner steps.
  if (minority_.empty())
    for (auto& f : syncs_) resend(f, false);
  heard_at_ = std::chrono::steady_clock::now();
}

// Admits the sites that knocked during the round; each receives the state
// the members hold now and trains from the next round on. A recovery that
// finds a survivor already past this admission ends it here.
void Trainer::admit_newcomers(int round, RoundMetrics& metrics) {
  while (minority_.empty() && admitted_round_ != round) {
    at_phase("admission", round);
    try {
      auto change = membership_->admit_waiting();
      const bool joined = !change.joined.empty();
      if (joined || !change.refused.empty()) metrics.membership.push_back(std::move(change));
      if (joined && comms_.leaders->rank() == 0) send_group_state(round, membership_->newcomers());
      membership_->set_admitted(round);
      admitted_round_ = round;
    } catch (const comm::PeerLost& lost) {
      if (recover_or_stop(lost.what(), metrics) == AfterLoss::kAdopted)
        throw comm::CommError("a site at its round boundary was behind the group's round (a protocol error)", -1);
    }
  }
}

// The leader tells its site whether it is still in the group. A site left
// in a minority saves the last round it completed with the group (its own
// progress since is kept as its local state) and stops on every rank.
void Trainer::stay_in_group(int round, const RoundMetrics& metrics, double initial_eval_loss) {
  std::int64_t out = minority_.empty() ? 0 : 1;
  comm::broadcast_values(*comms_.site, std::span<std::int64_t>(&out, 1), 0);
  if (out == 0) return;
  std::string where;
  if (!checkpoint_.dir.empty() && round > 1) {
    save_checkpoint(round - 1, metrics, initial_eval_loss);
    where = "; checkpoint of round " + std::to_string(round - 1) + " in " + checkpoint_.dir;
  }
  throw comm::MinorityError((minority_.empty() ? std::string("this site left the group") : minority_) + where +
                            " (launch it again to rejoin)");
}

}  // namespace diloco::outer
