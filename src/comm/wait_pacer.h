// How a wait that must not take a core paces its tests (MPI_Test, a probe):
// it sleeps between them, each pause a small share of the time it has
// waited so far, so a wait that ends soon is noticed soon and a long one
// wakes rarely:
//   pause = clamp(waited / kShare, kFirst, kLongest)
// The latency a pause adds to noticing the end is at most 1/kShare of the
// wait and at most kLongest; the wake-ups of a long wait come kLongest
// apart. bench/wait_bench.cpp measures the CPU this leaves (a waiting comm
// thread's share of a core) and the inner steps' speed beside it.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace diloco::comm {

class WaitPacer {
 public:
  static constexpr std::chrono::microseconds kFirst{50};
  static constexpr std::chrono::microseconds kLongest{20000};
  static constexpr int kShare = 32;

  WaitPacer() : since_(std::chrono::steady_clock::now()) {}

  // The pause to take after a test that found nothing, `waited` into the wait.
  static std::chrono::microseconds pause_after(std::chrono::steady_clock::duration waited) {
    const auto share = std::chrono::duration_cast<std::chrono::microseconds>(waited) / kShare;
    return std::clamp(share, kFirst, kLongest);
  }

  void pause() const { std::this_thread::sleep_for(pause_after(std::chrono::steady_clock::now() - since_)); }
  std::chrono::steady_clock::time_point since() const { return since_; }

 private:
  std::chrono::steady_clock::time_point since_;
};

}  // namespace diloco::comm
