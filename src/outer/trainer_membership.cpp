// The trainer between sites launched apart: where a round begins, how a
// round survives a lost site, and how newcomers catch up. The membership
// (comm::Membership) decides who is in; this file keeps the training state
// consistent with it.
#include <cstring>
#include <stdexcept>

#include "outer/trainer.h"

namespace diloco::outer {
namespace {

constexpr int kStateTag = 9201;

struct StateHeader {
  std::int64_t round = 0;
  std::int64_t started = 0;       // the outer optimizer has state
  std::int64_t outer_values = 0;
  std::int64_t params = 0;
};

}  // namespace

void Trainer::use_membership(comm::Membership* leader_membership) {
  if (sync_.mode != SyncMode::kDiLoCo || sync_.overlap != OverlapMode::kNone ||
      sync_.schedule_mode != ScheduleMode::kFixed)
    throw std::invalid_argument("sites launched apart (topology.join = \"rendezvous\") train blocking DiLoCo: "
                                "sync.mode = \"diloco\", sync.overlap = \"none\", sync.schedule = \"fixed\"");
  if (comms_.topology.is_leader() && !leader_membership)
    throw std::invalid_argument("a site leader needs the membership");
  rendezvous_ = true;
  membership_ = comms_.topology.is_leader() ? leader_membership : nullptr;
}

// What a site needs to train on from here: the round, the global params and
// the outer optimizer's state (rank 0's, which every member holds alike).
std::vector<std::byte> Trainer::group_state(int round) const {
  const auto& outer = *syncs_.front().outer;
  const auto state = outer.state();
  StateHeader h{round, outer.started() ? 1 : 0, static_cast<std::int64_t>(state.size()),
                static_cast<std::int64_t>(global_.size())};
  std::vector<std::byte> out(sizeof h + (global_.size() + state.size()) * sizeof(float));
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, global_.data(), global_.size() * sizeof(float));
  std::memcpy(out.data() + sizeof h + global_.size() * sizeof(float), state.data(), state.size() * sizeof(float));
  return out;
}

// Takes a state group_state() wrote; returns its round.
int Trainer::load_group_state(std::span<const std::byte> bytes) {
  StateHeader h;
  if (bytes.size() < sizeof h) throw comm::CommError("the group's state is truncated", -1);
  std::memcpy(&h, bytes.data(), sizeof h);
  const auto expected = sizeof h + static_cast<std::size_t>(h.params + h.outer_values) * sizeof(float);
  if (h.params != static_cast<std::int64_t>(global_.size()) || h.outer_values < 0 || bytes.size() != expected)
    throw comm::CommError("the group's state does not fit this site's model", -1);
  std::memcpy(global_.data(), bytes.data() + sizeof h, global_.size() * sizeof(float));
  std::vector<float> state(static_cast<std::size_t>(h.outer_values));
  std::memcpy(state.data(), bytes.data() + sizeof h + global_.size() * sizeof(float), state.size() * sizeof(float));
  syncs_.front().outer->load_state(state, h.started != 0);
  std::memcpy(inner_.params().data(), global_.data(), global_.size() * sizeof(float));
  return static_cast<int>(h.round);
}

// Round 1 (or a resumed run) starts from rank 0's state on every member; a
// site admitted later receives the group's state from rank 0 when it is
// admitted. Either way the site's ranks then learn the round to go on from.
void Trainer::start_from_group() {
  std::int64_t round = start_round_;
  if (membership_) {
    comm::Communicator& leaders = *comms_.leaders;
    if (membership_->joined_late()) {
      StateHeader h;
      leaders.recv(std::as_writable_bytes(std::span<StateHeader>(&h, 1)), 0, kStateTag);
      std::vector<std::byte> state(sizeof h + static_cast<std::size_t>(h.params + h.outer_values) * sizeof(float));
      std::memcpy(state.data(), &h, sizeof h);
      leaders.recv(std::span<std::byte>(state).subspan(sizeof h), 0, kStateTag + 1);
      round = load_group_state(state);
    } else {
      auto state = group_state(start_round_);
      std::uint64_t size = state.size();
      comm::broadcast_values(leaders, std::span<std::uint64_t>(&size, 1), 0);
      state.resize(size);
      leaders.broadcast(state, 0);
      round = load_group_state(state);
    }
  }
  comm::broadcast_values(*comms_.site, std::span<std::int64_t>(&round, 1), 0);
  start_round_ = static_cast<int>(round);
}

// The round's exchange, outer step and report, redone from the round's
// starting state by the survivors whenever a member is lost during it.
void Trainer::redo_on_loss(const std::function<void()>& once, RoundSync& sync, RoundMetrics& metrics) {
  const std::vector<float> global = global_;
  const auto local_span = inner_.params();
  const std::vector<float> local(local_span.begin(), local_span.end());
  const auto& f = syncs_.front();
  const std::vector<float> outer_state(f.outer->state().begin(), f.outer->state().end());
  const bool outer_started = f.outer->started();
  const std::vector<float> residual(f.exchange->residual().begin(), f.exchange->residual().end());
  const RoundMetrics before = metrics;
  const auto restore = [&] {
    global_ = global;
    std::memcpy(inner_.params().data(), local.data(), local.size() * sizeof(float));
    syncs_.front().outer->load_state(outer_state, outer_started);
    syncs_.front().exchange->set_residual(residual);
    auto events = std::move(metrics.membership);
    metrics = before;
    metrics.membership = std::move(events);
    sync = RoundSync{};
  };
  for (;;) {
    try {
      once();
      return;
    } catch (const comm::PeerLost& lost) {
      restore();
      if (!recover_or_stop(lost, metrics)) return;
    }
  }
}

// Agrees on the survivors; false (and minority_ set) when this site is not
// among a majority.
bool Trainer::recover_or_stop(const comm::PeerLost& lost, RoundMetrics& metrics) {
  try {
    metrics.membership.push_back(membership_->recover(lost.what()));
    return true;
  } catch (const comm::MinorityError& e) {
    minority_ = e.what();
    return false;
  }
}

// Admits the sites that knocked during the round; each receives the state
// the members hold now and trains from the next round on.
void Trainer::admit_newcomers(int round, RoundMetrics& metrics) {
  for (;;) {
    try {
      auto change = membership_->admit_waiting();
      if (change.joined.empty() && change.refused.empty()) return;
      const bool joined = !change.joined.empty();
      metrics.membership.push_back(std::move(change));
      if (!joined || comms_.leaders->rank() != 0) return;
      const auto state = group_state(round);
      for (int r : membership_->newcomers()) {
        comms_.leaders->send(std::span<const std::byte>(state).first(sizeof(StateHeader)), r, kStateTag);
        comms_.leaders->send(std::span<const std::byte>(state).subspan(sizeof(StateHeader)), r, kStateTag + 1);
      }
      return;
    } catch (const comm::PeerLost& lost) {
      if (!recover_or_stop(lost, metrics)) return;
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
