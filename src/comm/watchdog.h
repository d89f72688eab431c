// Fail fast instead of hanging: a thread that ends the process when one
// cross-rank wait lasts longer than the timeout, naming the ranks whose
// heartbeat went stale (a dead or frozen process stops beating).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace diloco::comm {

class Watchdog {
 public:
  // Heartbeats go to `heartbeat_dir`/rank-N, touched every half second; the
  // folder must be visible to every rank (the run's output folder).
  // `describe(rank)` names a rank in messages (its site).
  Watchdog(double timeout_s, std::string heartbeat_dir, int world_rank, int world_size,
           std::function<std::string(int)> describe);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Start-up and steady state have separate timeouts (as torchtitan does).
  void set_timeout(double timeout_s) { timeout_ms_.store(static_cast<long long>(timeout_s * 1000)); }

  // Marks a wait on other ranks for as long as the guard lives. Threads may
  // wait at once (an overlapped exchange beside the inner steps, and the main
  // thread waiting for it): each guard takes its own slot. No wait goes
  // untimed: with every slot taken (more concurrent waits than the design
  // has: a bug) the guard throws std::logic_error.
  class Guard {
   public:
    Guard(Watchdog* dog, const char* what);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Watchdog* dog_;
    int slot_ = -1;
  };

  // Ranks whose heartbeat is older than `stale_s` or missing.
  std::string stale_ranks(double stale_s) const;

 private:
  void loop();
  void beat();
  [[noreturn]] void expire(const char* what, double waited_s);

  std::atomic<long long> timeout_ms_;
  std::string dir_;
  int rank_;
  int size_;
  std::function<std::string(int)> describe_;
  struct Slot {
    std::atomic<bool> taken{false};
    std::atomic<const char*> waiting_on{nullptr};
    std::atomic<long long> since_ms{0};
  };
  static constexpr int kSlots = 16;
  Slot slots_[kSlots];
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace diloco::comm
