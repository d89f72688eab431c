// Guarding MPI's untimed calls (OverrunGuard), and binding the admission's
// MPI connection to the join handshake (docs/membership.md, "Admission"):
// the door hands the port to whoever completed the handshake, but another
// party may connect instead: a relay of the handshake that learned the port
// (keyed runs), or a stand-in for a newcomer that died after its "ready".
// So, after accept and before the merge, the keeper sends a fresh nonce over
// the new connection and only a party that answers it (keyed: with the key,
// bound to the handshake's session and the port) is merged; anyone else is
// dropped and the group goes on. Also the exchange channel, the comm
// thread's communicator, remade with every change of membership.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "comm/membership.h"
#include "comm/membership_wire.h"

namespace diloco::comm {

using namespace wire;

namespace {

// Waits for `request` at most `seconds`, sleeping between polls; cancels it
// (and returns false) when the time is up.
bool timed_wait(MPI_Request& request, double seconds) {
  const auto start = Clock::now();
  auto pause = std::chrono::microseconds(100);
  for (;;) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (since(start) > seconds) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  MPI_Cancel(&request);
  MPI_Request_free(&request);
  return false;
}

bool timed_recv(MPI_Comm comm, std::string& into, std::size_t size, double seconds) {
  into.assign(size, '\0');
  MPI_Request request;
  if (MPI_Irecv(into.data(), static_cast<int>(size), MPI_BYTE, 0, kChannelTag, comm, &request) != MPI_SUCCESS)
    return false;
  return timed_wait(request, seconds);
}

// Small messages leave at once (eager); the request is freed, not waited on.
bool send_now(MPI_Comm comm, const std::string& bytes) {
  MPI_Request request;
  if (MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, kChannelTag, comm, &request) !=
      MPI_SUCCESS)
    return false;
  return MPI_Request_free(&request) == MPI_SUCCESS;
}

}  // namespace

// Without a key the answer is the nonce itself: it proves only that the
// newcomer, not a stand-in (accept_stand_in.h), is on the connection and
// alive a moment before the merge.
bool Membership::check_channel(MPI_Comm inter, const std::string& session_port) {
  const std::string nonce = MessageAuth::random_bytes(32);
  std::string proof;
  return send_now(inter, nonce) &&
         timed_recv(inter, proof, config_.auth ? sizeof(MacTag) : nonce.size(),
                    std::min(kHandshakeS, config_.deadline_s / 2)) &&
         (config_.auth ? sealed(kChannelLabel, session_port + nonce, proof) : proof == nonce);
}

bool Membership::prove_channel(MPI_Comm inter, const std::string& session_port) {
  std::string nonce;
  return timed_recv(inter, nonce, 32, kHandshakeS) &&
         send_now(inter, config_.auth ? seal(kChannelLabel, session_port + nonce) : nonce);
}

namespace wire {

OverrunGuard::OverrunGuard(std::string what, double seconds) {
  thread_ = std::thread([this, what = std::move(what), seconds] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) return;
    std::fprintf(stderr, "diloco: %s did not complete within %.0f s (a peer died in the middle of it); "
                 "this site stops (exit 3) rather than hang\n", what.c_str(), seconds);
    std::fflush(nullptr);
    _exit(3);
  });
}

OverrunGuard::~OverrunGuard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  done_.notify_all();
  thread_.join();
}

}  // namespace wire

// Made again right after every change (founding, each admission's roster,
// a recovery's new communicator), at the same point on every member, so the
// duplicates match; timed like any wait between sites. Its user has stopped
// using it before the change (abandon_exchange()). After an admission the
// old one is freed: it is not left among the connected communicators that
// MPI_Finalize disconnects one by one, a handshake with peers that may have
// ended already (seen: a survivor's MPI_Finalize stuck on a broken pipe).
void Membership::follow_leaders(bool admission) {
  if (!config_.exchange_channel) return;
  if (side_) {
    side_->follow(*leaders_, admission);
    return;
  }
  side_owned_ = MpiCommunicator::timed_duplicate(*leaders_);
  side_ = side_owned_.get();
}

}  // namespace diloco::comm
