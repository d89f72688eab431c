// The door (docs/membership.md, "The door"): the TCP socket rank 0 of the
// group keeps published in the name service, the thread that takes knocks
// on it and keeps queued ones alive, and how a process that took part in a
// membership ends.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <list>
#include <memory>

#include "comm/membership.h"
#include "comm/membership_wire.h"

namespace diloco::comm {

using namespace wire;

bool wire::with_name_service(std::function<void()> call) {
  auto done = std::make_shared<std::promise<void>>();
  auto returned = done->get_future();
  std::thread([done, call = std::move(call)] {
    call();
    done->set_value();
  }).detach();
  return returned.wait_for(std::chrono::duration<double>(kHandshakeS)) == std::future_status::ready;
}

void Membership::open_door() {
  listener_ = std::make_unique<DoorListener>();
  const std::string door = "door-" + std::to_string(door_generation_);
  door_names_ = {name(door)};
  if (config_.auth) door_names_.push_back(plain_name(door));
  if (MPI_Publish_name(door_names_[0].c_str(), MPI_INFO_NULL, listener_->endpoint().c_str()) != MPI_SUCCESS)
    throw JoinError("cannot publish " + door_names_[0] + " on the rendezvous server (taken by another group?)");
  // The plain name only tells sites without the key why they are refused:
  // best effort (anyone reaching the server may have taken it).
  if (door_names_.size() > 1 &&
      MPI_Publish_name(door_names_[1].c_str(), MPI_INFO_NULL, listener_->endpoint().c_str()) != MPI_SUCCESS)
    door_names_.pop_back();
  closing_ = false;
  door_thread_ = std::thread([this] { door_loop(); });
}

// The door's thread: takes knocks as they come, each handshake (a few
// short messages, each timed) on a thread of its own, so a connection that
// says nothing delays nobody else's; keeps the queued ones alive until a
// round boundary admits them. It makes no MPI call.
void Membership::door_loop() {
  struct Handshake {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Handshake> handshakes;
  const auto reap = [&](bool all) {
    for (auto h = handshakes.begin(); h != handshakes.end();) {
      if (!all && !*h->done) {
        ++h;
        continue;
      }
      h->thread.join();
      h = handshakes.erase(h);
    }
  };
  auto last_beat = Clock::now();
  while (!closing_) {
    DoorSocket socket = listener_->accept(0.2);
    reap(false);
    // Past kDoorHandshakes at once (a flood), a connection is closed unheard.
    if (socket.open() && handshakes.size() < kDoorHandshakes) {
      auto done = std::make_shared<std::atomic<bool>>(false);
      handshakes.push_back({std::thread([this, done, s = std::move(socket)]() mutable {
                              take_knock(std::move(s));
                              *done = true;
                            }),
                            done});
    }
    if (since(last_beat) >= kKeepAliveS) {
      keep_alive();
      last_beat = Clock::now();
    }
  }
  reap(true);  // closing_ cuts their waits short
}

void Membership::take_knock(DoorSocket socket) {
  Knock knock;
  knock.socket = std::move(socket);
  knock.at = Clock::now();
  std::string refusal, frame;
  try {
    if (!knock.socket.receive(frame, kDoorReadS, &closing_) || frame.empty() || frame[0] != kHello)
      return;  // not a diloco site, or one that left: nothing to queue
    knock.hello = decode_hello(frame.substr(1));
    refusal = check_knock(knock);
  } catch (const std::exception& e) {
    refusal = std::string("malformed hello: ") + e.what();
  }
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  if (!refusal.empty()) return refuse(knock, refusal);
  // A site launched again supersedes its earlier knock (a launch that died
  // or was stopped while queued).
  for (auto k = knocks_.begin(); k != knocks_.end();)
    k = k->hello.index == knock.hello.index ? knocks_.erase(k) : k + 1;
  if (!ended_.empty()) return tell_ended(knock);
  if (knock.socket.send(std::string(1, kQueued))) knocks_.push_back(std::move(knock));
}

// Called with knocks_mutex_ held. Keyed, sealed with the knock's session:
// only the group that proved the key can end a newcomer's wait.
void Membership::tell_ended(Knock& knock) {
  knock.socket.send(kEnded + ended_ + (config_.auth ? seal(kEndedLabel, knock.session + ended_) : std::string()));
}

void Membership::finish(int round) {
  if (!door_thread_.joinable()) return;  // not the door's keeper
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  ended_ = "run \"" + config_.run_id + "\" ended at round " + std::to_string(round) +
           " before a round boundary admitted this site; nothing is left to train";
  for (auto& k : knocks_)
    if (!k.socket.peer_gone()) tell_ended(k);
  knocks_.clear();
}

// Every queued knock hears from the door each second; one whose connection
// is gone (the newcomer gave up or died) is dropped here, never admitted.
void Membership::keep_alive() {
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  for (auto k = knocks_.begin(); k != knocks_.end();) {
    if (!k->socket.peer_gone() && k->socket.send(std::string(1, kAlive))) ++k;
    else k = knocks_.erase(k);
  }
}

// Called with knocks_mutex_ held.
void Membership::refuse(Knock& knock, const std::string& why) {
  knock.socket.send(kRefused + why);
  refused_.push_back((knock.hello.name.empty() ? std::string("a site") : knock.hello.name) + ": " + why);
}

// With a key, the door challenges the newcomer: it sends its own nonce with
// the HMAC of the newcomer's (the group proves the key first), and expects
// the HMAC of its nonce and the hello back within the handshake's time.
std::string Membership::check_knock(Knock& knock) {
  const SiteHello& hello = knock.hello;
  const bool keyed = config_.auth != nullptr;
  if (keyed && !hello.keyed) return "the group requires a key (security.key_file) and this site has none";
  if (!keyed && hello.keyed) return "this site has a key (security.key_file) and the group uses none";
  if (!keyed) return "";
  if (hello.nonce.size() != 32) return "its key challenge is malformed";
  const std::string nonce = MessageAuth::random_bytes(32);
  knock.socket.send(kChallenge + nonce + seal(kAdmitLabel, hello.nonce));
  std::string response;
  if (!knock.socket.receive(response, kDoorReadS, &closing_) || response.empty() || response[0] != kResponse)
    return "no answer to the key challenge";
  if (!sealed(kJoinLabel, nonce + encode_hello(hello), response.substr(1)))
    return "its key does not match the group's (security.key_file)";
  knock.session = hello.nonce + nonce;
  return "";
}

int Membership::knocks_waiting() {
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  return static_cast<int>(
      std::count_if(knocks_.begin(), knocks_.end(), [](const Knock& k) { return !k.socket.peer_gone(); }));
}

// The queued knocks whose newcomer is still there.
std::vector<Membership::Knock> Membership::take_knocks() {
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  std::vector<Knock> out;
  for (auto& k : knocks_)
    if (!k.socket.peer_gone()) out.push_back(std::move(k));
  knocks_.clear();
  return out;
}

// The name service may be out of reach: the withdrawal gets kHandshakeS.
void Membership::end_run() {
  leaders_->barrier();
  if (leaders_->rank() != 0) return;
  if (!with_name_service([started = name("started")] { MPI_Unpublish_name(started.c_str(), MPI_INFO_NULL, "1"); }))
    std::fprintf(stderr, "diloco: the rendezvous did not answer within %.0f s; run \"%s\" stays marked as "
                 "started\n", kHandshakeS, config_.run_id.c_str());
}

// Withdraws the door from the name service and stops its thread; queued
// newcomers see their connection close and look for the next keeper's door.
void Membership::close_door() {
  if (!door_thread_.joinable()) return;
  closing_ = true;
  door_thread_.join();
  {
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    knocks_.clear();
  }
  // The name service may be out of reach (this site cut off): withdrawing
  // the names gets kHandshakeS, then they are left behind like a killed
  // keeper's (discovery tolerates stale names), never waited on for good.
  if (!with_name_service([names = door_names_, endpoint = listener_->endpoint()] {
        for (const auto& n : names) MPI_Unpublish_name(n.c_str(), MPI_INFO_NULL, endpoint.c_str());
      }))
    std::fprintf(stderr, "diloco: the rendezvous did not answer within %.0f s; this site's door names stay "
                 "published (the others step over them)\n", kHandshakeS);
  listener_.reset();
}

void end_membership_process(int exit_code, double grace_s) {
  std::fflush(nullptr);
  // MPI_Finalize can hang after a recovery (requests left on an abandoned
  // communicator): it gets grace_s, then the process ends with its code.
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
