// A dedicated thread that runs communication jobs one at a time, so a site
// leader's exchange between sites travels while its inner steps compute.
//
// Why a thread rather than non-blocking MPI progressed from the inner loop:
// the exchange algorithms (all-gather, ring with requantization per hop, the
// link emulation's holds) are chains of dependent blocking steps written once
// against Communicator. A thread runs them unchanged; non-blocking MPI would
// need each rewritten as a state machine polled between inner steps, and MPI
// makes no progress on a transfer between such polls. The cost: MPI must be
// initialized with MPI_THREAD_MULTIPLE (checked at start-up), and the thread
// uses its own duplicated communicator so its messages never match the main
// thread's.
#pragma once

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace diloco::comm {

class CommThread {
 public:
  CommThread();
  // Finishes the job in flight, if any, then joins.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Runs `job` on the thread. The future yields when it is done and rethrows
  // what it threw. Only one job is in flight at a time: submitting waits for
  // the previous one to be taken.
  std::future<void> submit(std::function<void()> job);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::packaged_task<void()> next_;
  bool has_next_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace diloco::comm
