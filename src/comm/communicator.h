// The communicator interface every backend implements (MPI now, NCCL for sites
// on GPUs). Collectives are written once against it, as gloo does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/watchdog.h"

namespace diloco::comm {

// Handle of a non-blocking operation. wait() returns once the buffers passed
// to the operation may be read and reused; it throws CommError on failure.
// Destroying an unfinished handle waits for it.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

// Bytes this rank has handed to the network, counted by the algorithm each
// collective uses (ring all-reduce 2(n-1)/n*S, all-gather (n-1)*S_own,
// broadcast root (n-1)*S, send S), as nccl-tests define bus bandwidth.
struct Traffic {
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place element-wise sum over all ranks.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  virtual std::unique_ptr<Work> all_reduce_sum_async(std::span<float> data) = 0;

  // Copies `data` from `root` to every rank; all ranks pass equal sizes.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;

  // Every rank contributes a buffer of any length (zero allowed) and receives
  // all of them, indexed by rank.
  virtual std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) = 0;

  // Sends `data` to `dest` while receiving a message of any length from
  // `source` (a ring step, a shift of an all-gather); both sides may call it
  // at once without deadlock.
  virtual std::vector<std::byte> send_recv(std::span<const std::byte> data, int dest, int source, int tag) = 0;

  virtual void send(std::span<const std::byte> data, int dest, int tag) = 0;
  virtual void recv(std::span<std::byte> data, int source, int tag) = 0;

  virtual void barrier() = 0;
  // A barrier for a wait that may be long (ranks of a site waiting for their
  // leader's exchange between sites, sites waiting for the slowest): the
  // early ranks sleep rather than spin where the backend allows it (MPI:
  // paced tests, comm/wait_pacer.h). Calling it before an operation that
  // follows such a wait keeps the operation itself at the backend's full speed.
  virtual void wait_for_all() { barrier(); }

  // A communicator over the same ranks whose messages never match this one's,
  // so another thread can run collectives on it at the same time (MPI needs
  // MPI_THREAD_MULTIPLE for that). Collective: every rank calls it. The copy
  // is timed by the same watchdog: no backend can forget to pass it on.
  std::unique_ptr<Communicator> duplicate() {
    auto copy = make_duplicate();
    copy->set_watchdog(watchdog_);
    return copy;
  }

  const Traffic& traffic() const { return traffic_; }

  // Every blocking call is then timed by `watchdog` (nullptr: untimed). A
  // communicator that wraps another passes it on (virtual for that reason).
  virtual void set_watchdog(Watchdog* watchdog) { watchdog_ = watchdog; }
  // What times this communicator's waits, for callers that wait on work it
  // runs elsewhere (a comm thread's future).
  Watchdog* watchdog() const { return watchdog_; }

 protected:
  virtual std::unique_ptr<Communicator> make_duplicate() = 0;

  Traffic traffic_;
  Watchdog* watchdog_ = nullptr;
};

// Helpers for typed buffers over the byte interface.
template <class T>
void broadcast_values(Communicator& comm, std::span<T> data, int root) {
  comm.broadcast(std::as_writable_bytes(data), root);
}

// The largest of every rank's `value` (a sum of one slot per rank: the
// interface has sums only). Collective.
inline double max_over_ranks(Communicator& comm, double value) {
  std::vector<double> per_rank(static_cast<std::size_t>(comm.size()), 0.0);
  per_rank[static_cast<std::size_t>(comm.rank())] = value;
  comm.all_reduce_sum(std::span<double>(per_rank));
  for (double v : per_rank) value = std::max(value, v);
  return value;
}

}  // namespace diloco::comm
