#include "app/debug_faults.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm/comm_error.h"

namespace diloco::app {

DebugFaults::DebugFaults(const DebugSection& debug, int world_rank, int site)
    : debug_(debug), world_rank_(world_rank), site_(site) {}

void DebugFaults::at_step(std::int64_t global_step) const {
  const auto note = [&](const char* what) {
    std::fprintf(stderr, "diloco: rank %d: [debug] %s at inner step %lld\n", world_rank_, what,
                 static_cast<long long>(global_step));
  };
  if (debug_.exit_rank == world_rank_ && debug_.exit_step == global_step) {
    note("exiting");
    std::_Exit(1);
  }
  if (debug_.throw_rank == world_rank_ && debug_.throw_step == global_step) {
    note("failing");
    throw std::runtime_error("[debug] injected failure at inner step " + std::to_string(global_step));
  }
  if (debug_.freeze_rank == world_rank_ && debug_.freeze_step == global_step) {
    note("freezing");
    std::raise(SIGSTOP);
  }
}

void DebugFaults::at_phase(const std::string& phase, int round) {
  if (raised_ || debug_.fault_site != site_ || debug_.fault_phase != phase) return;
  const bool join = phase.rfind("join-", 0) == 0;
  if (!join && (phase == "recovery" ? round < debug_.fault_round : round != debug_.fault_round)) return;
  raised_ = true;
  std::printf("site %d fault: %s at %s of round %d\n", site_, debug_.fault_signal.c_str(), phase.c_str(), round);
  std::fflush(stdout);
  if (debug_.fault_signal == "exit") std::_Exit(2);  // gives up, as its own join timeout would
  // The wait runs out 2 s on: the others, which completed the exchange too,
  // have applied it by then, so this site alone is behind.
  if (debug_.fault_signal == "timeout") {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    throw comm::PeerLost("[debug] site " + std::to_string(site_) + "'s wait ran out at " + phase + " of round " +
                             std::to_string(round) + " (nobody was lost)",
                         world_rank_);
  }
  std::raise(debug_.fault_signal == "stop" ? SIGSTOP : SIGKILL);
}

}  // namespace diloco::app
