// What the membership's pieces share (admission in membership.cpp, the
// newcomer's side in membership_join.cpp, the door in membership_door.cpp,
// recovery in membership_recover.cpp): frame kinds, labels, byte layouts and
// the guard for MPI's untimed calls. Internal to diloco_comm.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "comm/membership.h"

namespace diloco::comm::wire {

// Tags on the leaders' communicator, above any the exchange or probes use.
constexpr int kAlarmTag = 31001;
constexpr int kViewTag = 31010;  // + the agreement's attempt
constexpr int kAgreeAttempts = 3;
constexpr int kGroupTag = 32000;  // + the epoch (mod 1000)
constexpr int kChannelTag = 31100;  // the proof on an admission's MPI connection

// Frames on a door connection (door_socket.h): the first byte says what it is.
constexpr char kHello = 'H';      // newcomer -> door: its hello
constexpr char kChallenge = 'C';  // door -> newcomer (keyed): the door's nonce and its proof of the key
constexpr char kResponse = 'R';   // newcomer -> door (keyed): its proof
constexpr char kQueued = 'Q';     // door -> newcomer: accepted, waiting for the next round boundary
constexpr char kAlive = 'K';      // door -> newcomer: still queued (every kKeepAliveS)
constexpr char kRefused = '!';    // door -> newcomer: why it cannot join
constexpr char kAdmit = '+';      // door -> newcomer: the MPI port to connect to now
constexpr char kReady = 'Y';      // newcomer -> door: alive and connecting
constexpr char kEnded = 'E';      // door -> newcomer: the run ended before a boundary admitted it (keyed: sealed)

constexpr double kKeepAliveS = 1.0;
// How long the door keeper waits for a newcomer's hello, proof or "ready",
// and a newcomer for a door to answer its hello: short messages on a live
// connection, so seconds, not the exchange's deadline.
constexpr double kHandshakeS = 10.0;
// How long the door's thread waits for a hello or a key proof from a site
// that has proved nothing yet (while it waits, it takes no other knock).
constexpr double kDoorReadS = 3.0;
// How many handshakes the door runs at once (each on its own thread).
constexpr std::size_t kDoorHandshakes = 16;
// How long a stand-in (accept_stand_in.h) may take to start and connect:
// the accept's guard allows it beyond the deadline, and it ends itself after.
constexpr double kStandInS = 30.0;
// Doors are numbered by generation; a scan stops after this many missing.
constexpr int kDoorGap = 8;

// What the HMACs of a join cover: the group answers the newcomer's nonce
// under one label, the newcomer the group's nonce and its hello under
// another; the port and the ready answer are bound to both nonces.
constexpr const char* kAdmitLabel = "diloco-admit:";
constexpr const char* kJoinLabel = "diloco-join:";
constexpr const char* kPortLabel = "diloco-port:";
constexpr const char* kReadyLabel = "diloco-ready:";
constexpr const char* kEndedLabel = "diloco-ended:";
constexpr const char* kDoorLabel = "diloco-door:";
constexpr const char* kRosterLabel = "diloco-roster:";
constexpr const char* kChannelLabel = "diloco-channel:";  // the proof over the admission's MPI connection

// Runs `call` (calls into the name service) on a thread of its own and
// waits at most kHandshakeS for it: the server may be out of reach (this
// site cut off), and a site never hangs on it. False when it did not return
// in time (the call is left to finish or fail on its own).
bool with_name_service(std::function<void()> call);

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline void put_u32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
inline void put_text(std::string& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

// Reads what put_u32 and put_text wrote; throws JoinError at the end.
struct Reader {
  const std::string& in;
  std::size_t at = 0;
  std::uint32_t u32() {
    if (in.size() - at < sizeof(std::uint32_t)) throw JoinError("a membership message ends early");
    std::uint32_t v;
    std::memcpy(&v, in.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string text() {
    const auto n = u32();
    if (in.size() - at < n) throw JoinError("a membership message ends early");
    std::string s = in.substr(at, n);
    at += n;
    return s;
  }
};

// Ends the process (exit 3, with `what` on stderr) when the calls it guards
// have not returned within `seconds`: for MPI's calls that have no timed
// form (connect, accept, merge, create_group), entered only after a timed
// handshake, so an overrun means a peer died in the moment between.
class OverrunGuard {
 public:
  OverrunGuard(std::string what, double seconds);
  ~OverrunGuard();
  OverrunGuard(const OverrunGuard&) = delete;
  OverrunGuard& operator=(const OverrunGuard&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace diloco::comm::wire
