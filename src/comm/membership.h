// Membership of sites launched apart (each its own mpirun or Slurm job): the
// leaders' communicator they join through a rendezvous, who is in it, and
// what happens when a site is lost or comes back. In the spirit of torchft's
// manager and quorum, over MPI: the trainer asks it for the communicator and
// calls it at the two moments membership may change (a wait that gave up, a
// round boundary). Leaders only; the ranks inside a site never see it.
//
// The rendezvous is Open MPI's name service (ompi-server, given to every
// mpirun with --ompi-server). The group's first member (rank 0) keeps a
// door: a port it accepts on, published as "diloco-RUN-door-G", G counting
// the door's keepers (a new keeper after the old one is lost publishes
// G + 1, so a newcomer takes the highest it finds). A newcomer knocks with
// its hello; at the next round boundary the members accept it together and
// the merged communicator gets it as its last rank.
//
// Losses: every wait between sites has a deadline (PeerLost). The members
// that notice alarm everyone still listening, agree on who answered, and go
// on only as a strict majority of the last agreed membership, on a
// communicator of the survivors (MPI_Comm_create_group). Each change is an
// epoch; a stale member (frozen, cut off) keeps the old communicator, finds
// nobody there and stops as a minority.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_error.h"
#include "comm/message_auth.h"
#include "comm/mpi_communicator.h"

namespace diloco::comm {

// This site is on the minority side of a split (or was expelled): it must
// stop and let the majority go on.
class MinorityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The rendezvous could not be used (no server, nobody to join, refused).
class JoinError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a site announces when it joins.
struct SiteHello {
  int index = 0;               // unique in the run; also its data shard
  std::string name;
  double weight = 1.0;         // tokens per inner step
  std::string signature;       // the model's kind and shapes; must match the group's
  bool keyed = false;          // it holds a key (security.key_file) and proves it
  std::string nonce;           // keyed: the challenge the group answers to prove the key too
};

struct JoinConfig {
  std::string run_id;          // names in the rendezvous are "diloco-RUN-..."
  SiteHello hello;
  int founder = 0;             // the site index that founds the group when no door exists
  int expected_sites = 1;      // round 1 starts once this many have joined...
  int min_sites = 1;           // ...or this many after join_timeout_s
  double join_timeout_s = 120.0;
  double deadline_s = 60.0;    // every wait between sites (sync.timeout_s)
  double ping_s = 2.0;         // how long a recovery listens for the survivors
  // With a key: a newcomer proves it holds it (HMAC over a challenge) and the
  // group proves it back; a site without it, or with another, is refused.
  const MessageAuth* auth = nullptr;
};

// One change of membership, for the metrics.
struct MembershipChange {
  int epoch = 0;                      // the epoch it created
  std::vector<std::string> left;      // site names
  std::vector<std::string> joined;
  std::vector<std::string> refused;   // "name: reason" of sites refused at the door
  std::string why;
  // A loss: from noticing it to the survivors' communicator. A join: from
  // the knock to the admission (on the door's keeper; the merge elsewhere).
  double seconds = 0.0;
};

class Membership {
 public:
  // Joins the run's group or founds it (blocking until round 1 may start,
  // or, for a site arriving later, until it is admitted). Throws JoinError.
  explicit Membership(JoinConfig config);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // The leaders' communicator; the same object across epochs.
  MpiCommunicator& leaders() { return *leaders_; }
  // Hands the leaders' communicator to an owner that outlives this object's
  // use of it (the site's communicators); leaders() stays valid meanwhile.
  std::unique_ptr<MpiCommunicator> release_leaders() { return std::move(owned_); }
  int epoch() const { return epoch_; }
  // Every member, indexed by its rank in leaders().
  const std::vector<SiteHello>& members() const { return members_; }
  // Whether this site joined a group that had started training already.
  bool joined_late() const { return joined_late_; }
  // Ranks admitted by the last admit_waiting() (they need the state).
  const std::vector<int>& newcomers() const { return newcomers_; }

  // Collective over the members, at a round boundary: admits the sites that
  // knocked meanwhile. Returns the change (joined empty when none).
  MembershipChange admit_waiting();

  // After PeerLost, on every member that noticed: agrees on who is alive
  // and moves to their communicator. Throws MinorityError when the
  // survivors are no strict majority of the last membership.
  MembershipChange recover(const std::string& why);

 private:
  struct Knock {
    MPI_Comm door = MPI_COMM_NULL;  // intercommunicator with the newcomer
    SiteHello hello;
    std::chrono::steady_clock::time_point at;  // when it knocked
  };

  void enter();
  void found();
  void join(const std::string& door_port);
  void wait_for_sites();
  void open_door();
  void close_door();
  void door_loop();
  // The door's checks of a newcomer's hello; returns why it is refused, or "".
  std::string check_knock(MPI_Comm door, const SiteHello& hello);
  // The newcomer's side of the key check.
  void answer_challenge(MPI_Comm door, const std::string& hello_bytes);
  std::vector<Knock> take_knocks();
  void reopen_door();
  // Admits `knocks` (root's list; others pass empty): returns the names.
  std::vector<std::string> admit(std::vector<Knock> knocks);
  void share_roster();
  std::string name(const std::string& what) const { return "diloco-" + config_.run_id + "-" + what; }

  JoinConfig config_;
  std::unique_ptr<MpiCommunicator> owned_;
  MpiCommunicator* leaders_ = nullptr;
  std::vector<SiteHello> members_;
  std::vector<int> newcomers_;
  int epoch_ = 0;
  int door_generation_ = 0;   // the door this group publishes (rank 0 keeps it)
  bool joined_late_ = false;
  bool started_ = false;

  // The door (rank 0 only).
  std::string door_port_;
  std::thread door_thread_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> door_busy_{false};  // the door's thread is in an MPI call other than its accept
  std::mutex knocks_mutex_;
  std::deque<Knock> knocks_;
  std::vector<std::string> refused_;  // refusals at the door since the last admission
  std::condition_variable door_idle_;
};

// Ends a process that took part in a membership: MPI_Finalize, bounded by
// `grace_s` (it can hang on what a recovery abandoned), then _exit.
[[noreturn]] void end_membership_process(int exit_code, double grace_s = 10.0);

// Encodes and decodes hellos (exposed for tests of malformed input).
std::string encode_hello(const SiteHello& hello);
// Throws JoinError for bytes that are not a hello.
SiteHello decode_hello(const std::string& bytes);

}  // namespace diloco::comm
