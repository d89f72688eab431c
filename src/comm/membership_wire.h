// What the membership's pieces share (join, admission and recovery in
// membership.cpp, the door in membership_door.cpp): tags, the hello's byte
// layout, and small timed messages. Internal to diloco_comm.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "comm/membership.h"

namespace diloco::comm::wire {

// Tags on a door (the intercommunicator with one newcomer).
constexpr int kHelloTag = 1;
constexpr int kReplyTag = 2;
constexpr int kChallengeTag = 3;
constexpr int kResponseTag = 4;

// What the HMACs of a join cover: the group answers the newcomer's nonce
// under one label, the newcomer the group's nonce and its hello under another.
constexpr const char* kAdmitLabel = "diloco-admit:";
constexpr const char* kJoinLabel = "diloco-join:";

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

// A message of any length on `comm` from `source` into `out`; false when
// none arrives within `timeout_s` or `cancel` is set meanwhile.
inline bool receive_text(MPI_Comm comm, int source, int tag, double timeout_s, std::string& out,
                         const std::atomic<bool>* cancel = nullptr) {
  const auto start = Clock::now();
  for (;;) {
    if (cancel && cancel->load()) return false;
    int found = 0;
    MPI_Status status;
    DILOCO_MPI_CHECK(MPI_Iprobe(source, tag, comm, &found, &status));
    if (found) {
      int count = 0;
      DILOCO_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
      out.assign(static_cast<std::size_t>(count), '\0');
      DILOCO_MPI_CHECK(MPI_Recv(out.data(), count, MPI_BYTE, source, tag, comm, MPI_STATUS_IGNORE));
      return true;
    }
    if (since(start) > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

inline void send_text(MPI_Comm comm, int dest, int tag, const std::string& text) {
  DILOCO_MPI_CHECK(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_BYTE, dest, tag, comm));
}

}  // namespace diloco::comm::wire
