// NCCL backend of the communicator interface, for the ranks of one site on
// CUDA GPUs. Compiled only when the CUDA toolkit and NCCL are found.
//
// Every span passed in is device memory; all_gather and send_recv return
// their results in host memory (they are vectors). Operations run on the
// stream given at creation (libtorch's current stream for the device), so they
// are ordered after the kernels that produced their input. Blocking calls wait by polling
// the stream and ncclCommGetAsyncError: an NCCL failure aborts the
// communicator and throws CommError, and a wait that never ends is ended by
// the watchdog instead of hanging the job. NCCL ignores message tags:
// messages between two ranks match in the order they were sent.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "comm/communicator.h"

namespace diloco::comm {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`, which must outlive the communicator. Every
  // blocking call, initialization included, is timed by `watchdog` (nullptr:
  // untimed).
  static std::unique_ptr<NcclCommunicator> create(Communicator& bootstrap, int device, cudaStream_t stream,
                                                  Watchdog* watchdog);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

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

  // Waits until `event` completes, failing on an NCCL async error.
  void wait_event(cudaEvent_t event, const char* what);

 protected:
  std::unique_ptr<Communicator> make_duplicate() override;

 private:
  NcclCommunicator(Communicator& bootstrap, int device, cudaStream_t stream);
  void check(ncclResult_t result, const char* call);
  void check_cuda(cudaError_t result, const char* call);
  void use_device();
  void enqueue_sum(void* data, std::size_t count, ncclDataType_t type, std::size_t bytes);
  void complete(const char* what);  // records the stream's work and waits for it
  void copy_to_host(void* host, const void* device, std::size_t bytes);
  // Device scratch for at least `bytes`, grown on demand (sizes, barriers, staging).
  void* scratch(std::size_t bytes);

  Communicator& bootstrap_;
  int device_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace diloco::comm
