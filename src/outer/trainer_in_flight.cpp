// An exchange in flight on the comm thread across a change of membership
// (sites launched apart, delayed and streaming overlap; docs/membership.md,
// "Overlap").
// Every survivor sends its exchange in flight again over the survivors,
// from what it went out with (pseudo-gradient, residual, update), so no
// survivor applies an average that another one never got: one that
// arrived before the loss may hold the lost site's share, and another's
// may not. The comm thread's channel is given up before the membership
// remakes it, so the two threads never use it at once.
#include <algorithm>
#include <chrono>

#include "outer/trainer.h"

namespace diloco::outer {

// What f's exchange goes out with, kept until its result is applied.
void Trainer::keep_for_resend(FragmentSync& f, std::int64_t seed_round) {
  const auto residual = f.exchange->residual();
  f.resend = FragmentSync::Resend{f.delta, std::vector<float>(residual.begin(), residual.end()), f.update, seed_round,
                                  false};
}

// Waits for f's exchange in flight. Between sites launched apart it keeps
// listening for alarms meanwhile: a member that started a recovery is
// answered at once (PeerLost, which the round's redo takes), not after this
// exchange has run into its own deadline.
void Trainer::wait_in_flight(FragmentSync& f) {
  comm::Watchdog::Guard guard(comms_.leaders->watchdog(), "the exchange in flight on the comm thread");
  if (!membership_) {
    f.in_flight.wait();
    return;
  }
  while (f.in_flight.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) {
    if (!membership_->alarmed()) continue;
    quiesce();
    throw comm::PeerLost("another site started a recovery while this one waited for its exchange in flight", -1);
  }
}

// Before any change of membership: the comm thread's waits give up at once
// (its channel is about to be remade), its exchange ends, whatever came of
// it, and is marked to be sent again once the group has agreed.
void Trainer::quiesce() {
  if (!overlapped_membership()) return;
  bool any = false;
  for (const auto& f : syncs_) any = any || f.in_flight.valid();
  if (!any) return;
  membership_->abandon_exchange();
  comm::Watchdog::Guard guard(comms_.leaders->watchdog(), "the exchange in flight, given up");
  for (auto& f : syncs_) {
    if (!f.in_flight.valid()) continue;
    try {
      f.in_flight.get();
    } catch (const comm::CommError&) {   // given up, or lost a peer: sent again
    } catch (const ExchangeError&) {    // a peer of another epoch: likewise
    }
    if (f.resend) f.resend->again = true;
  }
}

// Sends f's exchange again, as quiesce() marked it, over the present
// members: on the comm thread (a site between its inner steps), or here.
void Trainer::resend(FragmentSync& f, bool blocking) {
  if (!f.resend || !f.resend->again || f.in_flight.valid()) return;
  const FragmentSync::Resend kept = *f.resend;
  f.delta = kept.delta;
  f.update = kept.update;
  f.exchange->set_residual(kept.residual);
  send(f, kept.seed_round, blocking);
  if (f.resend) f.resend->again = false;
}

// Streaming between sites launched apart. A fragment's result is final where
// it is applied: that site's progress says so (set_parts_done), and after
// a loss the survivors that did not apply it take the state of one that
// did. A survivor's result may hold the lost site's share and another's
// may not; only a site that got every share applies it, so whoever
// applied one applied the same. When nobody applied it, every survivor
// sends it again, as with delayed overlap. A survivor is at most one
// fragment behind another: nobody applies fragment i + 1 before every
// member has sent its share, which each sends after applying fragment i.
void Trainer::finish_fragment(std::size_t i, int round, RoundSync& sync) {
  FragmentSync& f = syncs_[i];
  if (!membership_) return finish(f, sync);
  while (minority_.empty() && parts_done_ <= static_cast<int>(i)) {
    try {
      finish(f, sync);  // sends it again first when a recovery marked it
      parts_done_ = static_cast<int>(i) + 1;
      membership_->set_parts_done(round - 1, parts_done_);
    } catch (const comm::PeerLost& lost) {
      // Its try ended here, whatever came of it: after the recovery it is
      // sent again (redo), or it came with the group's state (behind).
      if (f.resend) f.resend->again = true;
      recover_or_stop(lost.what(), between_steps_);
    }
  }
}

// After taking the group's state (its global params and outer state, local
// params kept): the fragments the group applied and this site did not are
// mixed in as their exchange would have; their residual stays what the
// payload sent left, since that payload is in the average taken.
void Trainer::take_missed_fragments(const comm::MembershipChange& change) {
  const int F = static_cast<int>(syncs_.size());
  const int upto = change.agreed_round >= between_steps_.round ? F : change.agreed_parts;
  for (int i = parts_done_; i < upto; ++i) {
    auto& f = syncs_[static_cast<std::size_t>(i)];
    f.resend.reset();
    mix_fragment(f);
  }
  parts_done_ = std::max(parts_done_, upto);
}

}  // namespace diloco::outer
