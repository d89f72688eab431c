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
    door_busy_ = true;
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    if (closing_) {
      door_busy_ = false;
      return;
    }
    std::string bytes;
    Knock knock;
    knock.door = inter;
    knock.at = Clock::now();
    std::string refusal;
    try {
      if (!receive_text(inter, 0, kHelloTag, config_.deadline_s, bytes, &closing_)) throw JoinError("no hello");
      knock.hello = decode_hello(bytes);
      refusal = check_knock(inter, knock.hello);
    } catch (const std::exception& e) {
      refusal = std::string("malformed hello: ") + e.what();
    }
    if (closing_) {
      door_busy_ = false;
      return;
    }
    if (!refusal.empty()) {
      send_text(inter, 0, kReplyTag, "!" + refusal);
      MPI_Comm_free(&inter);
      std::lock_guard<std::mutex> lock(knocks_mutex_);
      refused_.push_back((knock.hello.name.empty() ? std::string("a site") : knock.hello.name) + ": " + refusal);
      door_busy_ = false;
      continue;
    }
    // One newcomer at a time: the next accept waits until the main thread
    // has admitted or refused this one. Open MPI 4.1 deadlocks when two
    // connect/accept handshakes (or one and a communicator creation) of one
    // process run at once, and an accept only waiting for a peer is safe.
    std::unique_lock<std::mutex> lock(knocks_mutex_);
    knocks_.push_back(std::move(knock));
    door_idle_.wait(lock, [this] { return knocks_.empty() || closing_; });
    door_busy_ = false;
  }
}

// With a key, the door challenges the newcomer: it sends its own nonce with
// the HMAC of the newcomer's (the group proves the key first), and expects
// the HMAC of its nonce and the hello back within the deadline.
std::string Membership::check_knock(MPI_Comm door, const SiteHello& hello) {
  const bool keyed = config_.auth != nullptr;
  if (keyed && !hello.keyed) return "the group requires a key (security.key_file) and this site has none";
  if (!keyed && hello.keyed) return "this site has a key (security.key_file) and the group uses none";
  if (!keyed) return "";
  const std::string nonce = MessageAuth::random_bytes(32);
  const auto proof = config_.auth->tag(kAdmitLabel, std::as_bytes(std::span<const char>(hello.nonce)));
  send_text(door, 0, kChallengeTag, nonce + std::string(reinterpret_cast<const char*>(proof.data()), proof.size()));
  std::string response;
  if (!receive_text(door, 0, kResponseTag, config_.deadline_s, response, &closing_))
    return "no answer to the key challenge";
  const std::string signed_part = nonce + encode_hello(hello);
  if (!config_.auth->verify(kJoinLabel, std::as_bytes(std::span<const char>(signed_part)),
                            std::as_bytes(std::span<const char>(response))))
    return "its key does not match the group's (security.key_file)";
  return "";
}

// The newcomer checks the group's proof of the key, then proves its own.
void Membership::answer_challenge(MPI_Comm door, const std::string& hello_bytes) {
  const double timeout = config_.join_timeout_s;
  const auto start = Clock::now();
  std::string challenge;
  for (;;) {  // a challenge, or a refusal straight away
    int flag = 0;
    DILOCO_MPI_CHECK(MPI_Iprobe(0, kReplyTag, door, &flag, MPI_STATUS_IGNORE));
    if (flag) return;  // join() reads the refusal
    if (receive_text(door, 0, kChallengeTag, 0.05, challenge)) break;
    if (since(start) > timeout) throw JoinError("the group sent no key challenge within rendezvous.join_timeout_s");
  }
  if (challenge.size() != 32 + sizeof(MacTag)) throw JoinError("the group's key challenge is malformed");
  const std::string nonce = challenge.substr(0, 32);
  const bool group_proved = config_.auth->verify(kAdmitLabel, std::as_bytes(std::span<const char>(config_.hello.nonce)),
                                                 std::as_bytes(std::span<const char>(challenge).subspan(32)));
  // Answered either way, so the group learns at once that the keys differ.
  const std::string signed_part = nonce + hello_bytes;
  const auto response = config_.auth->tag(kJoinLabel, std::as_bytes(std::span<const char>(signed_part)));
  send_text(door, 0, kResponseTag, std::string(reinterpret_cast<const char*>(response.data()), response.size()));
  if (!group_proved)
    throw JoinError("refused: the group's key does not match this site's (security.key_file), or another run "
                    "answered at the rendezvous");
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
  // Wait (briefly) until the thread is back in its accept: it must not be
  // inside another MPI call when MPI_Finalize runs.
  for (int i = 0; i < 500 && door_busy_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
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
