// MPI backend: every call checked through DILOCO_MPI_CHECK; large buffers are
// split into chunks because MPI counts are ints.
#include "comm/mpi_communicator.h"
#include "comm/operation_buffers.h"
#include "comm/wait_pacer.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <chrono>

namespace diloco::comm {
namespace {

constexpr std::size_t kMaxChunk = std::size_t{1} << 30;  // elements per MPI call

int current_world_rank() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

template <class T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }


class MpiWork final : public Work {
 public:
  MpiWork(std::vector<MPI_Request> requests, Watchdog* watchdog)
      : requests_(std::move(requests)), watchdog_(watchdog) {}
  ~MpiWork() override {
    if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override {
    if (requests_.empty()) return;
    Watchdog::Guard guard(watchdog_, "all-reduce (async)");
    DILOCO_MPI_CHECK(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
    requests_.clear();
  }

 private:
  std::vector<MPI_Request> requests_;
  Watchdog* watchdog_;
};

}  // namespace

void throw_mpi_error(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(code, text, &length);
  const int rank = current_world_rank();
  std::ostringstream msg;
  msg << "rank " << rank << ": " << call << " failed: " << text << " (" << file << ":" << line << ")";
  throw CommError(msg.str(), rank);
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    // Multiple: an overlapped exchange runs on its own thread while the main
    // thread all-reduces gradients inside the site.
    DILOCO_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    finalize_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  threads_supported_ = provided >= MPI_THREAD_MULTIPLE;
  // Errors come back as return codes, so DILOCO_MPI_CHECK can name the call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

MpiSession::~MpiSession() {
  if (finalize_) MPI_Finalize();
}

void MpiSession::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  DILOCO_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DILOCO_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(out);
}

std::unique_ptr<Communicator> MpiCommunicator::make_duplicate() {
  MPI_Comm out = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Comm_dup(comm_, &out));
  auto dup = std::make_unique<MpiCommunicator>(out);
  dup->yield_while_waiting_ = true;
  return dup;
}

void MpiCommunicator::count_all_reduce(std::size_t bytes) {
  if (size_ > 1) traffic_.bytes_sent += 2 * (size_ - 1) * bytes / size_;
  traffic_.messages += 1;
}

// Blocking calls are non-blocking ones completed here: at once with
// MPI_Wait, or, on a communicator that yields (a comm thread's) or has a
// deadline, by testing with paced sleeps between tests (WaitPacer). Open
// MPI's own wait spins a core, and that core is one the inner steps beside
// it need. A communicator with a deadline gives up when it passes.
void MpiCommunicator::complete(MPI_Request& request, MPI_Status* status) {
  if (!polls()) {
    DILOCO_MPI_CHECK(MPI_Wait(&request, status));
    return;
  }
  test_until_done(request, status, "a collective between sites");
}

void MpiCommunicator::test_until_done(MPI_Request& request, MPI_Status* status, const char* what) {
  WaitPacer pacer;
  for (;;) {
    int done = 0;
    DILOCO_MPI_CHECK(MPI_Test(&request, &done, status));
    if (done) return;
    check_deadline(pacer.since(), what);
    pacer.pause();
  }
}

// Ibarrier, then paced tests: ranks that arrive early sleep instead of
// spinning until the last one comes.
void MpiCommunicator::wait_for_all() {
  if (size_ == 1) return;
  Watchdog::Guard guard(watchdog_, "waiting for every rank");
  MPI_Request request;
  DILOCO_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  test_until_done(request, MPI_STATUS_IGNORE, "waiting for every rank");
}

void MpiCommunicator::set_deadline(double seconds, int alarm_tag) {
  deadline_s_ = seconds;
  alarm_tag_ = alarm_tag;
}

void MpiCommunicator::replace(MPI_Comm comm) {
  comm_ = comm;
  DILOCO_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DILOCO_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MPI_Comm MpiCommunicator::duplicate_handle() {
  Watchdog::Guard guard(watchdog_, "duplicating a communicator");
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Request request;
  DILOCO_MPI_CHECK(MPI_Comm_idup(comm_, &out, &request));
  complete(request);
  return out;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::timed_duplicate(MpiCommunicator& parent) {
  auto dup = std::make_unique<MpiCommunicator>(parent.duplicate_handle());
  dup->yield_while_waiting_ = true;
  dup->set_watchdog(parent.watchdog());
  dup->set_deadline(parent.deadline_s_, parent.alarm_tag_);
  dup->alarms_from_ = &parent;
  return dup;
}

void MpiCommunicator::follow(MpiCommunicator& parent, bool free_old) {
  MPI_Comm old = comm_;
  replace(parent.duplicate_handle());
  if (free_old) MPI_Comm_free(&old);
  set_deadline(parent.deadline_s_, parent.alarm_tag_);
  alarms_from_ = &parent;
  abandoned_ = false;
}

void MpiCommunicator::check_deadline(std::chrono::steady_clock::time_point since, const char* what) {
  if (abandoned_)
    throw PeerLost(std::string("given up: the membership changed while this waited in ") + what,
                   current_world_rank());
  if (deadline_s_ <= 0.0) return;
  if (alarm_tag_ >= 0) {
    int alarm = 0;
    MPI_Status status;
    DILOCO_MPI_CHECK(
        MPI_Iprobe(MPI_ANY_SOURCE, alarm_tag_, alarms_from_ ? alarms_from_->comm_ : comm_, &alarm, &status));
    if (alarm)
      throw PeerLost("member " + std::to_string(status.MPI_SOURCE) + " started a recovery while this one waited in " +
                         what, current_world_rank());
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  if (waited > deadline_s_)
    throw PeerLost(std::string("no answer within ") + std::to_string(static_cast<int>(deadline_s_)) + " s (" + what +
                       ")", current_world_rank());
}

// Between sites (a deadline), every operation below works on buffers of its
// own (operation_buffers.h): the caller's are copied in and out.
template <class T>
void MpiCommunicator::all_reduce_chunks(std::span<T> data) {
  OperationBuffers own;
  const std::span<T> work = gives_up() ? own.copy_of(std::span<const T>(data)) : data;
  for (std::size_t off = 0; off < work.size(); off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, work.size() - off));
    MPI_Request request;
    DILOCO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, work.data() + off, n, mpi_type<T>(), MPI_SUM, comm_, &request));
    complete(request);
  }
  if (work.data() != data.data()) std::copy(work.begin(), work.end(), data.begin());
}

void MpiCommunicator::all_reduce_sum(std::span<float> data) {
  if (size_ == 1) return;
  Watchdog::Guard guard(watchdog_, "all-reduce");
  all_reduce_chunks(data);
  count_all_reduce(data.size_bytes());
}

void MpiCommunicator::all_reduce_sum(std::span<double> data) {
  if (size_ == 1) return;
  Watchdog::Guard guard(watchdog_, "all-reduce");
  all_reduce_chunks(data);
  count_all_reduce(data.size_bytes());
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_sum_async(std::span<float> data) {
  std::vector<MPI_Request> requests;
  if (size_ > 1) {
    for (std::size_t off = 0; off < data.size(); off += kMaxChunk) {
      const int n = static_cast<int>(std::min(kMaxChunk, data.size() - off));
      MPI_Request request;
      DILOCO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data() + off, n, MPI_FLOAT, MPI_SUM, comm_, &request));
      requests.push_back(request);
    }
    count_all_reduce(data.size_bytes());
  }
  return std::make_unique<MpiWork>(std::move(requests), watchdog_);
}

void MpiCommunicator::broadcast(std::span<std::byte> data, int root) {
  if (size_ == 1) return;
  Watchdog::Guard guard(watchdog_, "broadcast");
  OperationBuffers own;
  const std::span<std::byte> work = gives_up() ? own.copy(data) : data;
  for (std::size_t off = 0; off < work.size(); off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, work.size() - off));
    MPI_Request request;
    DILOCO_MPI_CHECK(MPI_Ibcast(work.data() + off, n, MPI_BYTE, root, comm_, &request));
    complete(request);
  }
  if (work.data() != data.data()) std::copy(work.begin(), work.end(), data.begin());
  if (rank_ == root) traffic_.bytes_sent += (size_ - 1) * data.size();
  traffic_.messages += 1;
}

std::vector<std::vector<std::byte>> MpiCommunicator::all_gather(std::span<const std::byte> mine) {
  std::vector<std::vector<std::byte>> out(size_);
  if (size_ == 1) {
    out[0].assign(mine.begin(), mine.end());
    return out;
  }
  if (mine.size() > static_cast<std::size_t>(INT_MAX))
    throw CommError("all_gather: buffer of " + std::to_string(mine.size()) + " bytes exceeds the MPI count limit", current_world_rank());
  Watchdog::Guard guard(watchdog_, "all-gather");
  OperationBuffers own;
  const std::span<const std::byte> sent = gives_up() ? own.copy(mine) : mine;
  // Lengths, then this rank's; counts and displacements: all the
  // operation's own, since a collective given up may still read or write them.
  const auto lengths = own.make_of<long long>(static_cast<std::size_t>(size_) + 1);
  lengths[static_cast<std::size_t>(size_)] = static_cast<long long>(mine.size());
  MPI_Request request;
  DILOCO_MPI_CHECK(MPI_Iallgather(&lengths[static_cast<std::size_t>(size_)], 1, MPI_LONG_LONG, lengths.data(), 1,
                                  MPI_LONG_LONG, comm_, &request));
  complete(request);
  const auto counts = own.make_of<int>(static_cast<std::size_t>(size_));
  const auto displs = own.make_of<int>(static_cast<std::size_t>(size_));
  long long total = 0;
  for (int r = 0; r < size_; ++r) {
    if (total + lengths[r] > INT_MAX)
      throw CommError("all_gather: total of " + std::to_string(total + lengths[r]) + " bytes exceeds the MPI count limit", current_world_rank());
    counts[r] = static_cast<int>(lengths[r]);
    displs[r] = static_cast<int>(total);
    total += lengths[r];
  }
  const auto flat = own.make(static_cast<std::size_t>(total));
  DILOCO_MPI_CHECK(MPI_Iallgatherv(sent.data(), static_cast<int>(sent.size()), MPI_BYTE, flat.data(),
                                   counts.data(), displs.data(), MPI_BYTE, comm_, &request));
  complete(request);
  for (int r = 0; r < size_; ++r)
    out[r].assign(flat.begin() + displs[r], flat.begin() + displs[r] + counts[r]);
  traffic_.bytes_sent += (size_ - 1) * (mine.size() + sizeof(long long));
  traffic_.messages += 2;
  return out;
}

std::vector<std::byte> MpiCommunicator::send_recv(std::span<const std::byte> data, int dest, int source, int tag) {
  if (data.size() > static_cast<std::size_t>(INT_MAX))
    throw CommError("send_recv: message of " + std::to_string(data.size()) + " bytes exceeds the MPI count limit",
                    current_world_rank());
  Watchdog::Guard guard(watchdog_, "exchange step");
  OperationBuffers own;
  const std::span<const std::byte> sent = gives_up() ? own.copy(data) : data;
  MPI_Request request;
  DILOCO_MPI_CHECK(MPI_Isend(sent.data(), static_cast<int>(sent.size()), MPI_BYTE, dest, tag, comm_, &request));
  MPI_Status status;
  MPI_Message message;
  if (polls()) {
    WaitPacer pacer;
    for (int found = 0; !found;) {
      DILOCO_MPI_CHECK(MPI_Improbe(source, tag, comm_, &found, &message, &status));
      if (found) break;
      check_deadline(pacer.since(), "an exchange step between sites");
      pacer.pause();
    }
  } else {
    DILOCO_MPI_CHECK(MPI_Mprobe(source, tag, comm_, &message, &status));
  }
  int count = 0;
  DILOCO_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  const auto in = own.make(static_cast<std::size_t>(count));
  MPI_Request receive;
  DILOCO_MPI_CHECK(MPI_Imrecv(in.data(), count, MPI_BYTE, &message, &receive));
  complete(receive);
  complete(request);
  traffic_.bytes_sent += data.size();
  traffic_.messages += 1;
  return {in.begin(), in.end()};
}

void MpiCommunicator::send(std::span<const std::byte> data, int dest, int tag) {
  Watchdog::Guard guard(watchdog_, "send");
  OperationBuffers own;
  const std::span<const std::byte> sent = gives_up() ? own.copy(data) : data;
  for (std::size_t off = 0; off < sent.size() || off == 0; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, sent.size() - off));
    MPI_Request request;
    DILOCO_MPI_CHECK(MPI_Isend(sent.data() + off, n, MPI_BYTE, dest, tag, comm_, &request));
    complete(request);
    if (sent.empty()) break;
  }
  traffic_.bytes_sent += data.size();
  traffic_.messages += 1;
}

void MpiCommunicator::recv(std::span<std::byte> data, int source, int tag) {
  Watchdog::Guard guard(watchdog_, "receive");
  OperationBuffers own;
  const std::span<std::byte> into = gives_up() ? own.make(data.size()) : data;
  for (std::size_t off = 0; off < data.size() || off == 0; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, data.size() - off));
    MPI_Status status;
    MPI_Request request;
    DILOCO_MPI_CHECK(MPI_Irecv(into.data() + off, n, MPI_BYTE, source, tag, comm_, &request));
    complete(request, &status);
    int received = 0;
    MPI_Get_count(&status, MPI_BYTE, &received);
    if (received != n)
      throw CommError("recv: expected " + std::to_string(n) + " bytes from rank " + std::to_string(source) +
                          ", got " + std::to_string(received), current_world_rank());
    if (data.empty()) break;
  }
  if (into.data() != data.data()) std::copy(into.begin(), into.end(), data.begin());
}

void MpiCommunicator::barrier() {
  if (size_ == 1) return;
  Watchdog::Guard guard(watchdog_, "barrier");
  MPI_Request request;
  DILOCO_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  complete(request);
}

}  // namespace diloco::comm
