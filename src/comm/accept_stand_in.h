// A stand-in for a newcomer that never connects. Every member enters
// MPI_Comm_accept only after the newcomer answered "ready" a moment before,
// but if it dies or freezes in that moment the accept, which has no timed
// form, waits forever, and Open MPI 4.1 offers no way to cancel it from
// inside (a process that connects to its own group's port hangs as well).
// So the keeper watches the newcomer's door connection while the accept
// runs; when it closes (the newcomer died) or the newcomer has not connected
// within the deadline, it launches a stand-in: a one-rank job of its own
// (mpirun through the run's ompi-server) that connects to the port in the
// newcomer's place. The accept returns, the stand-in proves nothing on the
// connection, and the group drops it and goes on (docs/membership.md).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <string>
#include <thread>

#include "comm/door_socket.h"

namespace diloco::comm {

class AcceptStandIn {
 public:
  // Watches `newcomer` (null on members other than the keeper: a no-op)
  // until destroyed; launches `program` (stand_in_program()) with `port`
  // when the connection closes or after `patience_s`.
  AcceptStandIn(const DoorSocket* newcomer, std::string port, double patience_s);
  ~AcceptStandIn();  // stops watching; a launched stand-in ends on its own
  AcceptStandIn(const AcceptStandIn&) = delete;
  AcceptStandIn& operator=(const AcceptStandIn&) = delete;

  // Why the stand-in was launched ("" when it was not).
  std::string why() const;

 private:
  void launch(const char* why);

  std::string port_;
  std::atomic<bool> done_{false};
  std::atomic<const char*> why_{nullptr};
  std::thread watcher_;
};

// The stand-in's program: $DILOCO_STAND_IN when set, else diloco-stand-in
// beside this program or one folder up (the build's tests); "" if none.
std::string stand_in_program();

// The stand-in's own side (diloco-stand-in PORT SECONDS): connects to PORT,
// says it is a stand-in, lets go. Returns its exit code.
int run_stand_in(int argc, char** argv);

}  // namespace diloco::comm
