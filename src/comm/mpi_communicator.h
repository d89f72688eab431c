// MPI backend of the communicator interface, and the process-wide MPI session.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "comm/comm_error.h"
#include "comm/communicator.h"

// Checks an MPI return code and throws CommError naming the call.
#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
namespace diloco::comm {
// Under ThreadSanitizer, what an MPI call does to memory goes untracked: with
// MPI_THREAD_MULTIPLE one thread's call may progress another thread's
// transfer and copy into its buffer, ordered by MPI through locks TSan cannot
// see inside the uninstrumented library. Accesses of this project's own code
// stay tracked.
struct MpiCallScope {
  MpiCallScope() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~MpiCallScope() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
};
}  // namespace diloco::comm
#define DILOCO_MPI_SCOPE ::diloco::comm::MpiCallScope diloco_mpi_scope_
#else
#define DILOCO_MPI_SCOPE
#endif

#define DILOCO_MPI_CHECK(call)                                          \
  do {                                                                  \
    int diloco_mpi_rc_;                                                 \
    {                                                                   \
      DILOCO_MPI_SCOPE;                                                 \
      diloco_mpi_rc_ = (call);                                          \
    }                                                                   \
    if (diloco_mpi_rc_ != MPI_SUCCESS)                                  \
      ::diloco::comm::throw_mpi_error(#call, diloco_mpi_rc_, __FILE__, __LINE__); \
  } while (0)

namespace diloco::comm {

[[noreturn]] void throw_mpi_error(const char* call, int code, const char* file, int line);

// Owns MPI_Init/MPI_Finalize for the process. One per program.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Whether MPI lets several threads call it at once (MPI_THREAD_MULTIPLE),
  // which overlapping the exchange with inner steps needs.
  bool threads_supported() const { return threads_supported_; }

  // Tears the whole job down; for errors seen by one rank only, so no peer hangs.
  [[noreturn]] static void abort(int exit_code);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  bool finalize_ = false;
  bool threads_supported_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  static std::unique_ptr<MpiCommunicator> world();

  // MPI_Comm_split; ranks passing color < 0 get nullptr.
  std::unique_ptr<MpiCommunicator> split(int color, int key);

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(std::span<float> data) override;
  void all_reduce_sum(std::span<double> data) override;
  std::unique_ptr<Work> all_reduce_sum_async(std::span<float> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override;
  std::vector<std::byte> send_recv(std::span<const std::byte> data, int dest, int source, int tag) override;
  void send(std::span<const std::byte> data, int dest, int tag) override;
  void recv(std::span<std::byte> data, int source, int tag) override;
  void barrier() override;
  void wait_for_all() override;

  MPI_Comm handle() const { return comm_; }

  // Between sites launched apart: every wait polls against `seconds` and
  // ends early when a message tagged `alarm_tag` is waiting (a peer started a
  // recovery); either way it throws PeerLost. 0 seconds turns it off.
  void set_deadline(double seconds, int alarm_tag);

  // Points this communicator at `comm` (a new membership), keeping its
  // traffic counters, deadline and settings. The old handle is not freed:
  // requests may still hang on it (a lost peer's), and freeing such a
  // communicator can block; it is left to MPI_Finalize.
  void replace(MPI_Comm comm);

  // Sites launched apart: a duplicate of `parent` for a comm thread (paced
  // waits, parent's deadline, and alarms heard on parent, where members
  // send them), made by MPI_Comm_idup and waited for as parent's waits are
  // (past the deadline, or on an alarm: PeerLost). Collective over
  // parent's ranks. Parent must outlive it.
  static std::unique_ptr<MpiCommunicator> timed_duplicate(MpiCommunicator& parent);
  // Becomes such a duplicate of `parent`'s present communicator (a new
  // membership); waits count again after abandon_waits(). `free_old`: the
  // old handle is freed (an admission: every member took part in all that
  // ran on it); otherwise it is left to MPI_Finalize, as replace() does.
  void follow(MpiCommunicator& parent, bool free_old);
  // From any thread: every wait on this communicator, under way or to come,
  // throws PeerLost at its next test until follow(). For a comm thread's
  // exchange that a change of membership has made moot.
  void abandon_waits() { abandoned_ = true; }

 protected:
  // The duplicate waits by testing and sleeping instead of spinning, since it
  // is meant for a thread that shares the cores with compute.
  std::unique_ptr<Communicator> make_duplicate() override;

 private:
  void count_all_reduce(std::size_t bytes);
  void complete(MPI_Request& request, MPI_Status* status = MPI_STATUS_IGNORE);
  // Tests `request` with paced sleeps between tests until it completes
  // (or, with a deadline, until it passes).
  void test_until_done(MPI_Request& request, MPI_Status* status, const char* what);
  template <class T>
  void all_reduce_chunks(std::span<T> data);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool yield_while_waiting_ = false;  // duplicates for comm threads sleep between tests
  double deadline_s_ = 0.0;
  int alarm_tag_ = -1;
  const MpiCommunicator* alarms_from_ = nullptr;  // a duplicate hears alarms sent on its parent
  std::atomic<bool> abandoned_{false};

  bool polls() const { return yield_while_waiting_ || deadline_s_ > 0.0; }
  // Whether a wait may give up, leaving its operation to the transport: such
  // operations work on buffers of their own (operation_buffers.h).
  bool gives_up() const { return deadline_s_ > 0.0; }
  // In deadline mode: throws PeerLost when the wait that began at `since`
  // has lasted too long or an alarm is waiting.
  void check_deadline(std::chrono::steady_clock::time_point since, const char* what);
  // MPI_Comm_idup of this communicator, waited for as its operations are.
  MPI_Comm duplicate_handle();
};

}  // namespace diloco::comm

#include "comm/topology.h"

namespace diloco::comm {

// Splits MPI_COMM_WORLD into `num_sites` contiguous sites and builds the site
// and leader communicators. Throws std::invalid_argument for a bad site count.
SiteComms make_mpi_site_comms(int num_sites);

// The same for any cut of the world (Topology::by_node, say).
SiteComms make_mpi_site_comms(const Topology& topology);

// This rank's place among the ranks of `comm` on its own node, from MPI's
// shared-memory split (MPI_COMM_TYPE_SHARED). Unlike launcher variables
// (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID) it is right under any
// launcher, hydra inside srun included. Collective.
struct NodeRank {
  int rank = 0;
  int size = 1;
};
NodeRank node_rank(const MpiCommunicator& comm);

// This rank's node name: DILOCO_NODE_NAME when set (a launcher that names
// nodes itself, or tests), else MPI_Get_processor_name.
std::string node_name();
// Every rank's node name, indexed by world rank.
std::vector<std::string> gather_node_names(Communicator& world);

}  // namespace diloco::comm
