// An exchange in flight on the comm thread across a change of membership
// (sites launched apart, delayed overlap; docs/membership.md, "Overlap").
// Every survivor sends its exchange in flight again over the survivors,
// from what it went out with (pseudo-gradient, residual, update), so no
// survivor applies an average that another one never got: one that
// arrived before the loss may hold the lost site's share, and another's
// may not. The comm thread's channel is given up before the membership
// remakes it, so the two threads never use it at once.
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

}  // namespace diloco::outer
