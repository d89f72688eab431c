// Test-only faults ([debug] in a recipe) raised on the real process, on the
// real code paths: a rank that dies, fails or freezes at an inner step, and
// a site leader that is killed, stops or gives up at a phase of a round
// between sites launched apart (the membership's fault matrix).
#pragma once

#include <cstdint>
#include <string>

#include "app/recipe.h"

namespace diloco::app {

class DebugFaults {
 public:
  DebugFaults(const DebugSection& debug, int world_rank, int site);

  // At every inner step (its global counter): [debug] exit_rank, throw_rank, freeze_rank.
  void at_step(std::int64_t global_step) const;

  // A site leader at `phase` of `round` ("inner", "exchange", "exchanged":
  // an overlapped or data-parallel exchange completed here and not yet
  // applied, "admission", "recovery"; a newcomer's "join-STEP"): [debug]
  // fault_site's fault_signal (SIGKILL, SIGSTOP, exit 2 as a site that gives
  // up, or "timeout": comm::PeerLost thrown 2 s on, as when this site's wait
  // runs out just after the others completed and applied it) once, in fault_round (a recovery:
  // the first from fault_round on; a join step: whatever the round). Prints
  // "site N fault: ..." first.
  void at_phase(const std::string& phase, int round);

 private:
  const DebugSection& debug_;
  const int world_rank_;
  const int site_;
  bool raised_ = false;
};

}  // namespace diloco::app
