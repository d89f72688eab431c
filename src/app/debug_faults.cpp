#include "app/debug_faults.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

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
  std::raise(debug_.fault_signal == "stop" ? SIGSTOP : SIGKILL);
}

}  // namespace diloco::app
