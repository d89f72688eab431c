// Membership of sites launched apart (each its own mpirun or Slurm job): the
// leaders' communicator they join through a rendezvous, who is in it, and
// what happens when a site is lost or comes back. In the spirit of torchft's
// manager and quorum, over MPI: the trainer asks it for the communicator and
// calls it at the moments membership may change (a wait that gave up, an
// alarm seen between inner steps, a round boundary). Leaders only; the ranks
// inside a site never see it. The protocol (states, messages, timeouts,
// invariants, what each failure leads to) is docs/membership.md.
//
// Joining: the group's rank 0 keeps a door, a TCP socket whose address is
// published in Open MPI's name service (ompi-server) as a numbered name; a
// newcomer tries the published doors, newest first, and does the whole
// handshake on that socket (hello, key proofs, "queued" and keepalives,
// "admit now" and "ready"), every step timed. Only then do the members and
// the newcomer enter MPI's untimed connect/accept and merge, under a guard
// that ends the process (exit 3) instead of hanging if it overruns.
//
// Losses: every wait between sites has a deadline (PeerLost) and polls for an
// alarm; a member computing its inner steps polls too (alarmed()). Members in
// a recovery agree, in timed attempts, on who is alive and on the newest
// round any of them completed; they go on only as a strict majority of the
// last agreed membership, on a communicator of the survivors
// (MPI_Comm_create_group, guarded). Each change is an epoch.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_error.h"
#include "comm/door_socket.h"
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

// The group this site knocked at finished its run before a round boundary
// admitted it: nothing is left to train (what() says which run and round).
// A JoinError, so a command that does not expect it (probe) reports it as one.
class RunEnded : public JoinError {
 public:
  using JoinError::JoinError;
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
  // Test-only: a newcomer calls it at each step of joining ("hello" sent,
  // "queued", "port" received, "ready" sent (just before connecting),
  // "connected", "merged"), with the port once it has one: a test plays a
  // relay that learned the port, or a newcomer that dies at that step.
  std::function<void(const char* step, const std::string& port)> at_join_step = nullptr;
  // Also keep a second communicator over the members, for a comm thread
  // (an exchange overlapped with inner steps): made again, timed, at every
  // change of membership, in step with the leaders' communicator.
  bool exchange_channel = false;
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
  // A loss: the newest round any survivor completed (every survivor goes on
  // from it), the rank (in the new communicator) that holds its state, and
  // whether this site is behind it and must take that state.
  std::int64_t agreed_round = 0;
  int agreed_parts = 0;               // sync points of round agreed_round + 1 done (set_parts_done)
  int state_from = 0;
  bool behind = false;
  std::vector<int> behind_ranks;      // every survivor that must take the state
  // A survivor finished the agreed round's admission: nobody runs it again.
  bool admission_done = false;
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
  // The comm thread's communicator (JoinConfig::exchange_channel; else
  // nullptr), the same object across epochs, handed over likewise. Before
  // a change of membership its user stops using it: abandon_exchange()
  // ends its waits (PeerLost) from any thread.
  MpiCommunicator* exchange_channel() { return side_; }
  std::unique_ptr<MpiCommunicator> release_exchange_channel() { return std::move(side_owned_); }
  void abandon_exchange() {
    if (side_) side_->abandon_waits();
  }
  int epoch() const { return epoch_; }
  // Every member, indexed by its rank in leaders().
  const std::vector<SiteHello>& members() const { return members_; }
  // Whether this site joined a group that had started training already.
  bool joined_late() const { return joined_late_; }
  // Ranks admitted by the last admit_waiting() (they need the state).
  const std::vector<int>& newcomers() const { return newcomers_; }
  // Which door this site came in by, for the log ("door 2 of run X").
  const std::string& joined_through() const { return joined_through_; }

  // How far this site got with the group, what a recovery compares: the
  // newest round it completed (exchange and report done), whether it also
  // finished that round's admission, and how many sync points of the next
  // round it has done since (streaming: fragments applied; data-parallel:
  // inner steps; at most kMaxParts - 1; each implies the admission before it).
  static constexpr std::int64_t kMaxParts = std::int64_t{1} << 20;
  void set_completed_round(std::int64_t round) { progress_ = 2 * (round * kMaxParts); }
  void set_admitted(std::int64_t round) { progress_ = 2 * (round * kMaxParts) + 1; }
  void set_parts_done(std::int64_t completed_round, int parts) {
    progress_ = 2 * (completed_round * kMaxParts + parts) + 1;
  }
  std::int64_t completed_round() const { return progress_ / 2 / kMaxParts; }

  // The longest any member may go without answering an alarm (its longest
  // inner step, evaluation or checkpoint save, as the members report them to
  // each other): a recovery's alarms are listened to for twice that, at
  // least ping_s and at most max(ping_s, deadline_s), so a member busy in a
  // long step is not counted as lost. Every member should set the same.
  void set_busy_s(double seconds) { busy_s_ = seconds; }
  double alarm_window_s() const;

  // Whether another member has started a recovery (an alarm is waiting):
  // polled between inner steps, so a member ahead of the others by a round
  // answers within one step and is not counted as lost. Cheap (one probe).
  bool alarmed();

  // The door's keeper (rank 0): how many newcomers are queued at the door
  // now; 0 on the other members.
  int knocks_waiting();

  // Collective over the members, at a round boundary: admits the sites that
  // knocked meanwhile. Returns the change (joined empty when none).
  MembershipChange admit_waiting();

  // After PeerLost or alarmed(), on every member that noticed: agrees on
  // who is alive and on the round to go on from, and moves to the
  // survivors' communicator. Throws MinorityError when the survivors are no
  // strict majority of the last membership.
  MembershipChange recover(const std::string& why);

  // Collective over the members, for a group that is done (a probe, once it
  // has measured): once every member is here, the name service forgets that
  // the run started, so the same run id forms a new group at once. (A group
  // that ends otherwise leaves the mark: its founder, launched again, waits
  // for a live group before it founds one; docs/membership.md.)
  void end_run();

  // A group that trained its last round (`round`), on every leader: the
  // door's keeper tells every newcomer queued at its door, and every one
  // that knocks until the door closes, that the run ended, so none waits for
  // an admission that will not come.
  void finish(int round);

 private:
  struct Knock {
    DoorSocket socket;             // the newcomer's door connection
    SiteHello hello;
    std::string session;           // keyed: both nonces, binding the admission to this handshake
    std::chrono::steady_clock::time_point at;  // when it knocked
  };
  struct Door {
    int generation = 0;
    std::string endpoint;
  };

  void enter();
  // The exchange channel follows the leaders' communicator (after each
  // change; `admission`: the old one is freed, as the leaders' is).
  void follow_leaders(bool admission);
  void found(int generation);
  // The newcomer's side: the doors published for the run, newest first.
  std::vector<Door> published_doors() const;
  bool run_started() const;
  // Knocks at `door`: false when it does not answer (a stale name, a
  // keeper that is gone); throws JoinError when the group refuses.
  bool knock(const Door& door);
  void wait_for_sites();
  void open_door();
  void close_door();
  void door_loop();
  void take_knock(DoorSocket socket);
  void keep_alive();
  // The door's checks of a newcomer's hello; returns why it is refused, or "".
  std::string check_knock(Knock& knock);
  // The newcomer's side of the key check; returns the session (both nonces).
  std::string answer_challenge(DoorSocket& door, const std::string& hello_bytes);
  std::vector<Knock> take_knocks();
  // Admits `knocks` (root's list; others pass empty): returns the names.
  std::vector<std::string> admit(std::vector<Knock> knocks);
  std::string admit_one(Knock* knock);
  int from_keeper(int value);
  void requeue(std::vector<Knock>& knocks, std::size_t from);
  int count_from_keeper(std::vector<Knock>& knocks);
  // Keyed runs, right after accept/connect and before the merge: the keeper
  // checks that the party on `inter` holds the key and the handshake's
  // session (`session_port`: both nonces and the port); the newcomer proves
  // it. Timed; false when the proof is missing or wrong.
  bool check_channel(MPI_Comm inter, const std::string& session_port);
  bool prove_channel(MPI_Comm inter, const std::string& session_port);
  // Keyed runs: a recovery message's words with their HMAC appended (under
  // `context`), how many words that adds, and the check on arrival.
  std::vector<std::int64_t> seal_words(std::vector<std::int64_t> words, const std::string& context) const;
  std::size_t sealed_words() const;
  bool words_sealed(std::span<const std::int64_t> words, const std::string& context) const;
  void share_roster();
  void refuse(Knock& knock, const std::string& why);
  std::string name(const std::string& what) const;
  std::string plain_name(const std::string& what) const;
  // Keyed runs: a MAC over `what` under `label`, as text (empty without a key).
  std::string seal(const std::string& label, const std::string& what) const;
  bool sealed(const std::string& label, const std::string& what, const std::string& mac) const;

  JoinConfig config_;
  double busy_s_ = 0.0;  // set_busy_s()
  std::chrono::steady_clock::time_point polled_at_ = std::chrono::steady_clock::now();  // alarmed()'s last call
  std::unique_ptr<MpiCommunicator> owned_;
  MpiCommunicator* leaders_ = nullptr;
  std::unique_ptr<MpiCommunicator> side_owned_;  // the exchange channel, until released
  MpiCommunicator* side_ = nullptr;
  std::vector<SiteHello> members_;
  std::vector<int> newcomers_;
  int epoch_ = 0;
  int door_generation_ = 0;   // the door this group publishes (rank 0 keeps it)
  bool joined_late_ = false;
  bool started_ = false;
  std::int64_t progress_ = 0;  // 2 x (round completed x kMaxParts + parts), + 1 once its admission is done
  bool door_answered_ = false;  // a door answered the last knock (it was alive)
  std::string refusal_;         // keyed: the last refusal no door proved, reported if none admits
  int left_in_batch_ = 0;     // admissions after the current one in its batch
  std::string joined_through_;

  // The door (rank 0 only).
  std::unique_ptr<DoorListener> listener_;
  std::vector<std::string> door_names_;
  std::thread door_thread_;
  std::atomic<bool> closing_{false};
  std::mutex knocks_mutex_;
  std::deque<Knock> knocks_;
  std::vector<std::string> refused_;  // refusals at the door since the last admission
  std::string ended_;                 // finish(): what the door tells newcomers; under knocks_mutex_
  void tell_ended(Knock& knock);      // with knocks_mutex_ held
};

// Ends a process that took part in a membership: MPI_Finalize, bounded by
// `grace_s` (it can hang on what a recovery abandoned), then _exit.
[[noreturn]] void end_membership_process(int exit_code, double grace_s = 10.0);

// Encodes and decodes hellos (exposed for tests of malformed input).
std::string encode_hello(const SiteHello& hello);
// Throws JoinError for bytes that are not a hello.
SiteHello decode_hello(const std::string& bytes);

}  // namespace diloco::comm
