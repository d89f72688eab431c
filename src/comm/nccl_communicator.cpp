#include "comm/nccl_communicator.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "comm/comm_error.h"
#include "comm/intra_site.h"

namespace diloco::comm {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclIdBytes), "NCCL_UNIQUE_ID_BYTES changed");

NcclIdBytes share_nccl_id(Communicator& bootstrap) {
  NcclIdBytes bytes{};
  if (bootstrap.rank() == 0) {
    ncclUniqueId id;
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess)
      throw CommError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(result), -1);
    std::memcpy(bytes.data(), &id, sizeof(id));
  }
  bootstrap.broadcast(std::as_writable_bytes(std::span<char>(bytes)), 0);
  return bytes;
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device, void* cuda_stream,
                                                     Watchdog* watchdog) {
  return NcclCommunicator::create(bootstrap, device, static_cast<cudaStream_t>(cuda_stream), watchdog);
}

namespace {

// Work of an async all-reduce: an event recorded after it on the stream.
class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& comm, cudaEvent_t event) : comm_(comm), event_(event) {}
  ~NcclWork() override {
    if (event_) {
      try {
        wait();
      } catch (...) {  // already reported by the communicator, which is aborted
      }
    }
  }
  void wait() override {
    if (!event_) return;
    cudaEvent_t event = event_;
    event_ = nullptr;
    struct Release {
      cudaEvent_t e;
      ~Release() { cudaEventDestroy(e); }
    } release{event};
    comm_.wait_event(event, "ncclAllReduce (async)");
  }

 private:
  NcclCommunicator& comm_;
  cudaEvent_t event_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, cudaStream_t stream)
    : bootstrap_(bootstrap), device_(device), stream_(stream), rank_(bootstrap.rank()), size_(bootstrap.size()) {}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& bootstrap, int device, cudaStream_t stream,
                                                           Watchdog* watchdog) {
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(bootstrap, device, stream));
  // Timed from the start: ncclCommInitRank blocks until every rank of the
  // site has called it, so a peer that never arrives is caught here too.
  comm->set_watchdog(watchdog);
  const NcclIdBytes bytes = share_nccl_id(bootstrap);
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof(id));
  comm->use_device();
  comm->check_cuda(cudaEventCreateWithFlags(&comm->done_, cudaEventDisableTiming), "cudaEventCreate");
  {
    Watchdog::Guard guard(comm->watchdog_, "ncclCommInitRank");
    comm->check(ncclCommInitRank(&comm->comm_, comm->size_, id, comm->rank_), "ncclCommInitRank");
  }
  return comm;
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  // ncclCommDestroy is collective: it waits for every peer to destroy its
  // communicator too. Destroyed while an exception unwinds (this rank is
  // leaving on its own while its peers sit in the next collective), it would
  // hang; then the communicator is aborted, which returns at once. (Errors
  // that end the job are reported and the job aborted before any destructor
  // runs; this covers whatever unwinds all the same.)
  if (comm_) {
    if (std::uncaught_exceptions() > 0) ncclCommAbort(comm_);
    else ncclCommDestroy(comm_);
  }
  if (done_) cudaEventDestroy(done_);
  if (scratch_) cudaFree(scratch_);
}

void NcclCommunicator::check(ncclResult_t result, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string message = std::string(call) + ": " + ncclGetErrorString(result);
  if (const char* last = comm_ ? ncclGetLastError(comm_) : nullptr; last && *last) message += " (" + std::string(last) + ")";
  // Aborted here, on this rank only. That does not end the peers: they stay
  // in their own NCCL call until the job is ended, which this CommError does
  // (the training command prints it and calls MPI_Abort for the whole job);
  // a peer whose rank dies without that is ended by the watchdog timing its wait.
  if (comm_) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  throw CommError("NCCL: " + message, -1);
}

void NcclCommunicator::check_cuda(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return;
  if (comm_) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  throw CommError(std::string("NCCL communicator: ") + call + ": " + cudaGetErrorString(result), -1);
}

void NcclCommunicator::use_device() {
  if (!comm_ && done_) throw CommError("NCCL communicator was aborted after an earlier failure", -1);
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
}

void NcclCommunicator::wait_event(cudaEvent_t event, const char* what) {
  Watchdog::Guard guard(watchdog_, what);
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) check_cuda(state, what);
    ncclResult_t async = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    check(async, what);
    std::this_thread::yield();
  }
}

void NcclCommunicator::complete(const char* what) {
  check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
  wait_event(done_, what);
}

// After complete(): the stream is idle, so this copy waits only for itself.
void NcclCommunicator::copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void* NcclCommunicator::scratch(std::size_t bytes) {
  if (bytes > scratch_bytes_) {
    if (scratch_) check_cuda(cudaFree(scratch_), "cudaFree");
    scratch_ = nullptr;
    check_cuda(cudaMalloc(&scratch_, bytes), "cudaMalloc");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

// Queues an in-place sum on the stream and counts it as a ring all-reduce.
void NcclCommunicator::enqueue_sum(void* data, std::size_t count, ncclDataType_t type, std::size_t bytes) {
  use_device();
  check(ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_), "ncclAllReduce");
  if (size_ > 1) traffic_.bytes_sent += 2 * (size_ - 1) * bytes / size_;
  traffic_.messages += 1;
}

// The per-step gradient sum: waits on the communicator's one event rather
// than creating one per call.
void NcclCommunicator::all_reduce_sum(std::span<float> data) {
  enqueue_sum(data.data(), data.size(), ncclFloat, data.size_bytes());
  complete("ncclAllReduce");
}

void NcclCommunicator::all_reduce_sum(std::span<double> data) {
  enqueue_sum(data.data(), data.size(), ncclDouble, data.size_bytes());
  complete("ncclAllReduce");
}

std::unique_ptr<Work> NcclCommunicator::all_reduce_sum_async(std::span<float> data) {
  enqueue_sum(data.data(), data.size(), ncclFloat, data.size_bytes());
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventRecord(event, stream_), "cudaEventRecord");
  return std::make_unique<NcclWork>(*this, event);
}

void NcclCommunicator::broadcast(std::span<std::byte> data, int root) {
  use_device();
  check(ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_), "ncclBroadcast");
  if (rank_ == root) traffic_.bytes_sent += (size_ - 1) * data.size();
  traffic_.messages += 1;
  complete("ncclBroadcast");
}

std::vector<std::vector<std::byte>> NcclCommunicator::all_gather(std::span<const std::byte> mine) {
  use_device();
  // Lengths first (NCCL gathers equal sizes), then every buffer padded to the longest.
  const auto n = static_cast<std::size_t>(size_);
  std::vector<std::uint64_t> lengths(n, 0);
  lengths[static_cast<std::size_t>(rank_)] = mine.size();
  auto* dev_lengths = static_cast<std::uint64_t*>(scratch(n * sizeof(std::uint64_t)));
  check_cuda(cudaMemcpyAsync(dev_lengths, lengths.data(), n * sizeof(std::uint64_t), cudaMemcpyHostToDevice, stream_),
             "cudaMemcpyAsync");
  check(ncclAllReduce(dev_lengths, dev_lengths, n, ncclUint64, ncclSum, comm_, stream_), "ncclAllReduce");
  // The NCCL call completes under the timed wait first: a copy into pageable
  // host memory blocks the host until everything before it on the stream is
  // done, untimed and blind to NCCL's async errors, so a missing peer would
  // hang it. After the wait the copy waits for nothing but itself.
  complete("ncclAllReduce (all_gather lengths)");
  copy_to_host(lengths.data(), dev_lengths, n * sizeof(std::uint64_t));
  std::uint64_t longest = 0;
  for (auto l : lengths) longest = std::max(longest, l);
  std::vector<std::vector<std::byte>> out(n);
  if (longest == 0) return out;
  auto* gathered = static_cast<std::byte*>(scratch(longest * (n + 1)));
  std::byte* send = gathered + longest * n;
  check_cuda(cudaMemcpyAsync(send, mine.data(), mine.size(), cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  check(ncclAllGather(send, gathered, longest, ncclUint8, comm_, stream_), "ncclAllGather");
  traffic_.bytes_sent += (n - 1) * mine.size();
  traffic_.messages += 1;
  complete("ncclAllGather");
  std::vector<std::byte> host(longest * n);
  copy_to_host(host.data(), gathered, host.size());
  for (std::size_t r = 0; r < n; ++r)
    out[r].assign(host.begin() + static_cast<std::ptrdiff_t>(r * longest),
                  host.begin() + static_cast<std::ptrdiff_t>(r * longest + lengths[r]));
  return out;
}

std::vector<std::byte> NcclCommunicator::send_recv(std::span<const std::byte> data, int dest, int source, int) {
  use_device();
  auto* lengths = static_cast<std::uint64_t*>(scratch(2 * sizeof(std::uint64_t)));
  const std::uint64_t mine = data.size();
  check_cuda(cudaMemcpyAsync(lengths, &mine, sizeof(mine), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  check(ncclGroupStart(), "ncclGroupStart");
  check(ncclSend(lengths, 1, ncclUint64, dest, comm_, stream_), "ncclSend");
  check(ncclRecv(lengths + 1, 1, ncclUint64, source, comm_, stream_), "ncclRecv");
  check(ncclGroupEnd(), "ncclGroupEnd");
  complete("ncclSend/ncclRecv (lengths)");
  std::uint64_t theirs = 0;
  copy_to_host(&theirs, lengths + 1, sizeof(theirs));
  auto* incoming = static_cast<std::byte*>(scratch(std::max<std::uint64_t>(theirs, 1)));
  check(ncclGroupStart(), "ncclGroupStart");
  check(ncclSend(data.data(), data.size(), ncclUint8, dest, comm_, stream_), "ncclSend");
  check(ncclRecv(incoming, theirs, ncclUint8, source, comm_, stream_), "ncclRecv");
  check(ncclGroupEnd(), "ncclGroupEnd");
  complete("ncclSend/ncclRecv");
  std::vector<std::byte> out(theirs);
  copy_to_host(out.data(), incoming, theirs);
  traffic_.bytes_sent += data.size();
  traffic_.messages += 1;
  return out;
}

void NcclCommunicator::send(std::span<const std::byte> data, int dest, int) {
  use_device();
  check(ncclSend(data.data(), data.size(), ncclUint8, dest, comm_, stream_), "ncclSend");
  traffic_.bytes_sent += data.size();
  traffic_.messages += 1;
  complete("ncclSend");
}

void NcclCommunicator::recv(std::span<std::byte> data, int source, int) {
  use_device();
  check(ncclRecv(data.data(), data.size(), ncclUint8, source, comm_, stream_), "ncclRecv");
  complete("ncclRecv");
}

void NcclCommunicator::barrier() {
  use_device();
  auto* token = static_cast<float*>(scratch(sizeof(float)));
  check(ncclAllReduce(token, token, 1, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
  complete("ncclAllReduce (barrier)");
}

std::unique_ptr<Communicator> NcclCommunicator::make_duplicate() {
  return create(bootstrap_, device_, stream_, watchdog());
}

}  // namespace diloco::comm
