// One site of a membership test: joins the run through the rendezvous, then
// each round sums its round number and a value over the leaders (the value
// of every site is its index + 1, so the sum tells who took part), admits
// newcomers at round boundaries and recovers from losses (answering alarms
// while it "computes", taking the newest round from a survivor ahead of it).
// Prints one line per round ("round R epoch E sites N sum S") and per
// change; exit 4 as a minority, 3 on other communication errors, 2 on a
// refused join.
//   membership_site RUN INDEX EXPECTED ROUNDS ROUND_S DEADLINE_S [SIGNATURE]
// Environment: MEMBERSHIP_KEY, a key every site of the run holds (keyed
// joins); MEMBERSHIP_PORT_SPY, a file where a newcomer writes the port its
// door handed out, then waits 3 s before connecting (a relay's chance);
// MEMBERSHIP_FAULT="kill|stop|exit PHASE ROUND", this site kills or stops
// itself (SIGKILL, SIGSTOP) or gives up (exit 2) in ROUND at PHASE: "inner"
// (halfway through the round's compute), "exchange" (as the others enter
// the round's sum), "admission" (as the others admit a newcomer after the
// round), "recovery" (as it enters the first recovery from ROUND on), or,
// as a newcomer, "join-STEP" at a step of joining (JoinConfig::at_join_step:
// hello, queued, port, ready, connected, merged; ROUND is ignored);
// MEMBERSHIP_STEP_S, the length of this site's "inner steps" (alarms are
// answered between them; 0.02 s unless set); MEMBERSHIP_RECOVER_AT=ROUND,
// this site starts a recovery as ROUND's compute begins, as one that noticed
// a loss would. The sites share their longest step in each round's sum
// (Membership::set_busy_s).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

#include "comm/membership.h"

using namespace diloco::comm;

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s RUN INDEX EXPECTED ROUNDS ROUND_S DEADLINE_S [SIGNATURE]\n", argv[0]);
    return 2;
  }
  static MpiSession mpi(&argc, &argv);  // never destroyed: the end is bounded below
  JoinConfig config;
  config.run_id = argv[1];
  config.hello.index = std::atoi(argv[2]);
  config.hello.name = "site-" + std::string(argv[2]);
  config.hello.signature = argc > 7 ? argv[7] : "model";
  config.expected_sites = std::atoi(argv[3]);
  config.min_sites = config.expected_sites / 2 + 1;
  config.join_timeout_s = 30.0;
  const int rounds = std::atoi(argv[4]);
  const double round_s = std::atof(argv[5]);
  config.deadline_s = std::atof(argv[6]);
  std::unique_ptr<MessageAuth> auth;
  if (const char* key = std::getenv("MEMBERSHIP_KEY")) config.auth = (auth = std::make_unique<MessageAuth>(key)).get();
  std::string fault_signal, fault_phase;
  int fault_round = -1;
  if (const char* fault = std::getenv("MEMBERSHIP_FAULT"); fault && *fault) {
    char sig[16] = {0}, phase[16] = {0};
    if (std::sscanf(fault, "%15s %15s %d", sig, phase, &fault_round) != 3) return 2;
    fault_signal = sig;
    fault_phase = phase;
  }
  // Raises the fault when this site is at `phase` in round `round` (or later, for a recovery).
  const auto fault_at = [&](const std::string& phase, double round) {
    if (fault_phase != phase || round < fault_round || (fault_phase != "recovery" && round != fault_round)) return;
    std::printf("site %d fault: %s at %s of round %d\n", config.hello.index, fault_signal.c_str(), phase.c_str(),
                int(round));
    std::fflush(stdout);
    fault_phase.clear();
    if (fault_signal == "exit") _exit(2);  // gives up, as its own join timeout would
    raise(fault_signal == "stop" ? SIGSTOP : SIGKILL);
  };
  const char* step_env = std::getenv("MEMBERSHIP_STEP_S");
  const auto step = std::chrono::duration<double>(step_env ? std::atof(step_env) : 0.02);
  const char* recover_env = std::getenv("MEMBERSHIP_RECOVER_AT");
  const double recover_at = recover_env ? std::atof(recover_env) : -1;
  const char* spy = std::getenv("MEMBERSHIP_PORT_SPY");
  config.at_join_step = [&, spy = std::string(spy ? spy : "")](const char* step, const std::string& port) {
    fault_at(std::string("join-") + step, fault_round);
    if (spy.empty() || std::string(step) != "ready") return;
    if (FILE* f = std::fopen((spy + ".tmp").c_str(), "w")) {
      std::fputs(port.c_str(), f);
      std::fclose(f);
      std::rename((spy + ".tmp").c_str(), spy.c_str());
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
  };
  int code = 0;
  try {
    Membership members(config);
    auto& leaders = members.leaders();
    std::printf("site %d %s\n", config.hello.index, members.joined_through().c_str());
    // A newcomer learns the round to continue from (rank 0 sends it).
    double completed = 0;
    if (members.joined_late()) {
      leaders.recv(std::as_writable_bytes(std::span<double>(&completed, 1)), 0, 77);
      std::printf("site %d joined late at round %d epoch %d sites %d\n", config.hello.index, int(completed),
                  members.epoch(), leaders.size());
    }
    std::fflush(stdout);
    members.set_admitted(static_cast<std::int64_t>(completed));
    double admitted = completed;  // the round whose admission is done
    // After a recovery: a site behind the newest round any survivor
    // completed takes that round from the one that holds it (here the round
    // number is all the state there is); returns whether this site did.
    const auto recover = [&](const std::string& why, double round) {
      fault_at("recovery", round);
      return members.recover(why);
    };
    const auto settle = [&](const MembershipChange& change) {
      std::printf("site %d lost", config.hello.index);
      for (const auto& name : change.left) std::printf(" %s", name.c_str());
      std::printf(" epoch %d recovered in %.2f s at round %lld%s\n", change.epoch, change.seconds,
                  static_cast<long long>(change.agreed_round), change.behind ? " (behind: taking it)" : "");
      std::fflush(stdout);
      if (change.admission_done) admitted = static_cast<double>(change.agreed_round);
      if (change.behind) {
        leaders.recv(std::as_writable_bytes(std::span<double>(&completed, 1)), change.state_from, 78);
        if (change.admission_done) members.set_admitted(static_cast<std::int64_t>(completed));
        else members.set_completed_round(static_cast<std::int64_t>(completed));
        return true;
      }
      if (leaders.rank() == change.state_from)
        for (int r : change.behind_ranks) leaders.send(std::as_bytes(std::span<double>(&completed, 1)), r, 78);
      return false;
    };
    while (completed < rounds) {
      const double round = completed + 1;
      // The "inner steps": alarms are answered between them.
      bool adopted = false;
      bool halfway = false;
      if (round == recover_at) adopted = settle(recover("a test's alarm", round));
      for (const auto t0 = std::chrono::steady_clock::now();;) {
        const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (spent >= round_s) break;
        if (!halfway && spent >= round_s / 2) {
          halfway = true;
          fault_at("inner", round);
        }
        std::this_thread::sleep_for(step);
        if (members.alarmed()) adopted = settle(recover("an alarm between steps", round)) || adopted;
      }
      if (adopted) continue;
      std::vector<double> values;
      for (;;) {
        // Round, the sites' indexes + 1, and each rank's longest step.
        values.assign(2 + static_cast<std::size_t>(leaders.size()), 0.0);
        values[0] = round;
        values[1] = config.hello.index + 1;
        values[2 + static_cast<std::size_t>(leaders.rank())] = step.count();
        fault_at("exchange", round);
        try {
          leaders.all_reduce_sum(std::span<double>(values));
          members.set_busy_s(*std::max_element(values.begin() + 2, values.end()));
          break;
        } catch (const PeerLost& e) {
          if ((adopted = settle(recover(e.what(), round)))) break;
        }
      }
      if (!adopted) {
        if (values[0] != round * leaders.size()) {
          std::printf("site %d round %d MISMATCH sum of rounds %g\n", config.hello.index, int(round), values[0]);
          return 1;
        }
        completed = round;
        members.set_completed_round(static_cast<std::int64_t>(completed));
        std::printf("site %d round %d epoch %d sites %d sum %g\n", config.hello.index, int(round), members.epoch(),
                    leaders.size(), values[1]);
        std::fflush(stdout);
      }
      while (admitted != completed) {
        fault_at("admission", completed);
        try {
          const auto change = members.admit_waiting();
          for (int r : members.newcomers()) leaders.send(std::as_bytes(std::span<double>(&completed, 1)), r, 77);
          for (const auto& name : change.joined)
            std::printf("site %d round %d admitted %s epoch %d\n", config.hello.index, int(completed), name.c_str(),
                        change.epoch);
          for (const auto& why : change.refused)
            std::printf("site %d round %d refused %s\n", config.hello.index, int(completed), why.c_str());
          members.set_admitted(static_cast<std::int64_t>(completed));
          admitted = completed;
        } catch (const PeerLost& e) {
          settle(recover(e.what(), completed));
        }
      }
      std::fflush(stdout);
    }
  } catch (const MinorityError& e) {
    std::printf("site %d minority: %s\n", config.hello.index, e.what());
    code = 4;
  } catch (const JoinError& e) {
    std::printf("site %d join refused: %s\n", config.hello.index, e.what());
    code = 2;
  } catch (const CommError& e) {
    std::printf("site %d communication error: %s\n", config.hello.index, e.what());
    code = 3;
  }
  end_membership_process(code);
}
