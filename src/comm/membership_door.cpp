// The door: the port rank 0 of the group keeps open in the name service, the
// thread that accepts newcomers on it one at a time, and how a process that
// took part in a membership ends (see membership.h).
#include <unistd.h>

#include <cstdio>

#include "comm/membership.h"
#include "comm/membership_wire.h"

namespace diloco::comm {

using namespace wire;

void Membership::open_door() {
  char port[MPI_MAX_PORT_NAME] = {0};
  DILOCO_MPI_CHECK(MPI_Open_port(MPI_INFO_NULL, port));
  door_port_ = port;
  const std::string door = name("door-" + std::to_string(door_generation_));
  if (MPI_Publish_name(door.c_str(), MPI_INFO_NULL, port) != MPI_SUCCESS)
    throw JoinError("cannot publish " + door + " on the rendezvous server");
  closing_ = false;
  door_thread_ = std::thread([this] { door_loop(); });
}

// The door's thread: accepts one newcomer at a time and queues its hello
// for the next round boundary. A newcomer that connects and says nothing
// within the deadline is dropped.
void Membership::door_loop() {
  while (!closing_) {
    MPI_Comm inter = MPI_COMM_NULL;
    if (MPI_Comm_accept(door_port_.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) != MPI_SUCCESS) return;
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    if (closing_) {
      MPI_Comm_free(&inter);
      return;
    }
    std::string bytes;
    Knock knock;
    knock.door = inter;
    try {
      if (!receive_text(inter, 0, kHelloTag, config_.deadline_s, bytes)) throw JoinError("no hello");
      knock.hello = decode_hello(bytes);
    } catch (const std::exception& e) {
      send_text(inter, 0, kReplyTag, std::string("!malformed hello: ") + e.what());
      MPI_Comm_free(&inter);
      continue;
    }
    // One newcomer at a time: the next accept waits until the main thread
    // has admitted or refused this one. Open MPI 4.1 deadlocks when two
    // connect/accept handshakes (or one and a communicator creation) of one
    // process run at once, and an accept only waiting for a peer is safe.
    std::unique_lock<std::mutex> lock(knocks_mutex_);
    knocks_.push_back(std::move(knock));
    door_idle_.wait(lock, [this] { return knocks_.empty() || closing_; });
  }
}

std::vector<Membership::Knock> Membership::take_knocks() {
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  std::vector<Knock> out(std::make_move_iterator(knocks_.begin()), std::make_move_iterator(knocks_.end()));
  return out;
}

// The knocks taken are settled: the door may accept the next newcomer.
void Membership::reopen_door() {
  {
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    knocks_.clear();
  }
  door_idle_.notify_all();
}

// Withdraws the door from the name service and lets its thread go: an
// accept cannot be cancelled (waking it by connecting from this process
// hangs in Open MPI 4.1), so the thread stays blocked until the process
// ends; end_membership() bounds that end.
void Membership::close_door() {
  if (!door_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    closing_ = true;
    for (auto& k : knocks_) send_text(k.door, 0, kReplyTag, "!the group is shutting down");
  }
  door_idle_.notify_all();
  const std::string door = name("door-" + std::to_string(door_generation_));
  MPI_Unpublish_name(door.c_str(), MPI_INFO_NULL, door_port_.c_str());
  door_thread_.detach();
}

void end_membership_process(int exit_code, double grace_s) {
  std::fflush(nullptr);
  // MPI_Finalize can hang after a recovery (requests left on an abandoned
  // communicator, a door still accepting): it gets grace_s, then the
  // process ends with its code anyway.
  std::thread([exit_code, grace_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
    std::fflush(nullptr);
    _exit(exit_code);
  }).detach();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  std::fflush(nullptr);
  _exit(exit_code);
}

}  // namespace diloco::comm
