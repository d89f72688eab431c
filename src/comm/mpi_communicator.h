// MPI backend of the communicator interface, and the process-wide MPI session.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "comm/comm_error.h"
#include "comm/communicator.h"

// Checks an MPI return code and throws CommError naming the call.
#define DILOCO_MPI_CHECK(call)                                          \
  do {                                                                  \
    int diloco_mpi_rc_ = (call);                                        \
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

  // Tears the whole job down; for errors seen by one rank only, so no peer hangs.
  [[noreturn]] static void abort(int exit_code);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  bool finalize_ = false;
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

  MPI_Comm handle() const { return comm_; }

 private:
  void count_all_reduce(std::size_t bytes);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace diloco::comm

#include "comm/topology.h"

namespace diloco::comm {

// Splits MPI_COMM_WORLD into `num_sites` contiguous sites and builds the site
// and leader communicators. Throws std::invalid_argument for a bad site count.
SiteComms make_mpi_site_comms(int num_sites);

}  // namespace diloco::comm
