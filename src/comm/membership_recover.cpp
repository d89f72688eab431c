// Recovering from a lost member (docs/membership.md, "Recovery"): alarms,
// the agreement on who is alive and on the round, and the survivors'
// communicator.
#include <algorithm>
#include <cstring>
#include <deque>

#include "comm/membership.h"
#include "comm/membership_wire.h"

namespace diloco::comm {

using namespace wire;

// One probe may not see an alarm that arrived while this member was busy
// (Open MPI's TCP transport reads a socket only on a later pass of its
// progress engine), so after a long step it probes for up to 2 ms: one
// step's delay, not two, in answering. Quick steps probe once each.
bool Membership::alarmed() {
  const bool after_long_step = since(polled_at_) > 0.1;
  const auto now = Clock::now();
  int flag = 0;
  do {
    DILOCO_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kAlarmTag, leaders_->handle(), &flag, MPI_STATUS_IGNORE));
  } while (!flag && after_long_step && since(now) < 0.002);
  polled_at_ = Clock::now();
  return flag != 0;
}

namespace {

// Sends that are never waited for (a peer may be gone) keep their buffers
// as long as the process: the transport may still read them while
// MPI_Finalize runs, after the recovery that posted them has returned.
template <class T>
const T* kept(std::vector<T> values) {
  static std::deque<std::vector<T>> buffers;
  buffers.push_back(std::move(values));
  return buffers.back().data();
}

// Posts one receive per peer marked in `from`, waits up to `window_s` for
// them, cancels the rest; `got[p]` is 1 for each that arrived.
void listen(MPI_Comm comm, int tag, const std::vector<unsigned char>& from, std::vector<std::vector<std::int64_t>>& into,
            std::vector<unsigned char>& got, double window_s) {
  const auto n = from.size();
  std::vector<MPI_Request> requests(n, MPI_REQUEST_NULL);
  got.assign(n, 0);
  for (std::size_t p = 0; p < n; ++p)
    if (from[p])
      DILOCO_MPI_CHECK(MPI_Irecv(into[p].data(), static_cast<int>(into[p].size()), MPI_INT64_T, static_cast<int>(p),
                                 tag, comm, &requests[p]));
  const auto t0 = Clock::now();
  for (;;) {
    bool all = true;
    for (std::size_t p = 0; p < n; ++p) {
      if (requests[p] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      DILOCO_MPI_CHECK(MPI_Test(&requests[p], &flag, MPI_STATUS_IGNORE));
      if (flag) got[p] = 1;
      else all = false;
    }
    if (all || since(t0) > window_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& r : requests)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
}

}  // namespace

// Keyed runs: a recovery's messages carry an HMAC over what they are (kind,
// epoch, attempt, sender) and their words, in 4 more words; one that fails
// counts as not heard. Without a key they go as they are.
std::size_t Membership::sealed_words() const { return config_.auth ? sizeof(MacTag) / sizeof(std::int64_t) : 0; }

std::vector<std::int64_t> Membership::seal_words(std::vector<std::int64_t> words, const std::string& context) const {
  if (!config_.auth) return words;
  const auto mac = config_.auth->tag(context, std::as_bytes(std::span<const std::int64_t>(words)));
  const std::size_t at = words.size();
  words.resize(at + sealed_words());
  std::memcpy(words.data() + at, mac.data(), mac.size());
  return words;
}

bool Membership::words_sealed(std::span<const std::int64_t> words, const std::string& context) const {
  if (!config_.auth) return true;
  const std::size_t body = words.size() - sealed_words();
  return config_.auth->verify(context, std::as_bytes(words.first(body)), std::as_bytes(words.subspan(body)));
}

// The alarm's listening window: a member answers between two inner steps
// (or after an evaluation or a checkpoint save), so the window covers twice
// the longest of those any member reported. It stays within the deadline,
// which bounds how long a recovery may take as a relaunched founder counts
// it (Membership::enter): a member whose step is longer than half the
// deadline can still be counted as lost.
double Membership::alarm_window_s() const {
  return std::min(std::max(config_.ping_s, 2.0 * busy_s_), std::max(config_.ping_s, config_.deadline_s));
}

// 1. Alarms: every member in the recovery tells every other and listens
//    for alarm_window_s(); who answers is alive (a member between inner
//    steps answers within one step, since it polls alarmed()).
// 2. Agreement, in at most kAgreeAttempts timed attempts: each sends its
//    view (who it heard) and its progress (the newest round it completed,
//    and whether it finished that round's admission) to everyone that
//    answered the alarm; a member decides when everyone in its view answered
//    with the same view, and then sends its decision for every attempt left,
//    so a member that missed an answer adopts the decided view that holds
//    it instead of deciding apart. Otherwise its next view keeps only who
//    answered and what they all saw. Symmetric failures (a death, a freeze,
//    a cut) settle in the first attempt.
// 3. The majority rule against the last agreed membership, then the
//    survivors' communicator (guarded: every survivor proved alive and
//    agreed just before).
MembershipChange Membership::recover(const std::string& why) {
  const auto start = Clock::now();
  MPI_Comm old = leaders_->handle();
  const int n = leaders_->size();
  const int me = leaders_->rank();
  const auto N = static_cast<std::size_t>(n);
  const auto self = static_cast<std::size_t>(me);

  // Lets MPI's progress engine see connections that closed first: a site
  // that was stopped (SIGSTOP) while its peers left finds their sockets
  // closed, and a send on one that MPI still thinks open aborts the process
  // in Open MPI 4.1, where one it knows closed is only an error.
  for (int i = 0; i < 20; ++i) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, old, &flag, MPI_STATUS_IGNORE);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<unsigned char> others(N, 1);
  others[self] = 0;
  const auto context = [&](const char* kind, int attempt, std::size_t from) {
    return std::string("diloco-") + kind + ":" + std::to_string(epoch_) + ":" + std::to_string(attempt) + ":" +
           std::to_string(from) + ":";
  };
  const int alarm_words = static_cast<int>(1 + sealed_words());
  const std::int64_t* alarm = kept(seal_words({epoch_}, context("alarm", 0, self)));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    MPI_Request send;
    DILOCO_MPI_CHECK(MPI_Isend(alarm, alarm_words, MPI_INT64_T, p, kAlarmTag, old, &send));
    MPI_Request_free(&send);
  }
  std::vector<std::vector<std::int64_t>> heard(N, std::vector<std::int64_t>(static_cast<std::size_t>(alarm_words)));
  std::vector<unsigned char> view;
  listen(old, kAlarmTag, others, heard, view, alarm_window_s());
  for (std::size_t p = 0; p < N; ++p)
    if (view[p] && !words_sealed(heard[p], context("alarm", 0, p))) view[p] = 0;
  const std::vector<unsigned char> answered_alarm = view;  // whom every attempt listens to
  view[self] = 1;

  // A message: [decided, view (N), progress of each member in the view (N)].
  std::vector<std::int64_t> progress(N, -1);
  progress[self] = progress_;
  const int view_words = static_cast<int>(2 * N + 1 + sealed_words());
  const auto send_all = [&](int attempt, bool decided) {
    std::vector<std::int64_t> mine(2 * N + 1);
    mine[0] = decided ? 1 : 0;
    for (std::size_t p = 0; p < N; ++p) {
      mine[1 + p] = view[p];
      mine[1 + N + p] = progress[p];
    }
    const std::int64_t* sent = kept(seal_words(std::move(mine), context("view", attempt, self)));
    for (int p = 0; p < n; ++p) {
      if (!answered_alarm[static_cast<std::size_t>(p)]) continue;
      MPI_Request send;
      DILOCO_MPI_CHECK(MPI_Isend(sent, view_words, MPI_INT64_T, p, kViewTag + attempt, old, &send));
      MPI_Request_free(&send);
    }
  };
  bool agreed = false;
  for (int attempt = 0; attempt < kAgreeAttempts && !agreed; ++attempt) {
    send_all(attempt, false);
    std::vector<std::vector<std::int64_t>> theirs(N, std::vector<std::int64_t>(static_cast<std::size_t>(view_words)));
    std::vector<unsigned char> answered;
    listen(old, kViewTag + attempt, answered_alarm, theirs, answered, config_.ping_s);
    for (std::size_t p = 0; p < N; ++p)
      if (answered[p] && !words_sealed(theirs[p], context("view", attempt, p))) answered[p] = 0;
    // Another member decided on a view that holds this one: take it.
    for (std::size_t p = 0; p < N && !agreed; ++p)
      if (answered[p] && theirs[p][0] == 1 && theirs[p][1 + self] == 1) {
        for (std::size_t q = 0; q < N; ++q) {
          view[q] = static_cast<unsigned char>(theirs[p][1 + q]);
          progress[q] = theirs[p][1 + N + q];
        }
        progress[self] = progress_;
        agreed = true;
      }
    if (agreed) {
      for (int later = attempt + 1; later < kAgreeAttempts; ++later) send_all(later, true);
      break;
    }
    agreed = true;
    std::vector<unsigned char> next(N, 0);
    for (std::size_t p = 0; p < N; ++p) next[p] = view[p] && (answered[p] || p == self);
    for (std::size_t p = 0; p < N; ++p) {
      if (!view[p] || p == self) continue;
      if (!answered[p]) {
        agreed = false;
        continue;
      }
      progress[p] = theirs[p][1 + N + p];
      for (std::size_t q = 0; q < N; ++q) {
        if (static_cast<unsigned char>(theirs[p][1 + q]) != view[q]) agreed = false;
        if (!theirs[p][1 + q] && q != self) next[q] = 0;
      }
    }
    if (agreed) {
      for (int later = attempt + 1; later < kAgreeAttempts; ++later) send_all(later, true);
    } else {
      view = next;
    }
  }
  std::vector<std::int64_t> completed(N, -1);
  for (std::size_t p = 0; p < N; ++p)
    if (view[p]) completed[p] = progress[p];

  const int survivors = static_cast<int>(std::count(view.begin(), view.end(), 1));
  if (2 * survivors <= n)
    throw MinorityError("after " + why + ", this site reached " + std::to_string(survivors) + " of the " +
                        std::to_string(n) + " sites of membership epoch " + std::to_string(epoch_) +
                        ": not a strict majority, so it stops and the others (if they are the majority) go on");
  if (!agreed)
    throw CommError("the surviving sites could not agree on a membership after " + why + " in " +
                        std::to_string(kAgreeAttempts) + " attempts (an asymmetric network cut?); stopping this site",
                    -1);

  std::vector<int> kept_ranks;
  for (int p = 0; p < n; ++p)
    if (view[static_cast<std::size_t>(p)]) kept_ranks.push_back(p);
  MPI_Group all_group, kept_group;
  DILOCO_MPI_CHECK(MPI_Comm_group(old, &all_group));
  DILOCO_MPI_CHECK(MPI_Group_incl(all_group, survivors, kept_ranks.data(), &kept_group));
  MPI_Comm fresh = MPI_COMM_NULL;
  {
    OverrunGuard guard("building the survivors' communicator", config_.deadline_s + config_.ping_s);
    DILOCO_MPI_CHECK(MPI_Comm_create_group(old, kept_group, kGroupTag + epoch_ % 1000, &fresh));
  }
  MPI_Group_free(&kept_group);
  MPI_Group_free(&all_group);
  leaders_->replace(fresh);

  MembershipChange change;
  std::vector<SiteHello> remaining;
  const std::int64_t agreed_progress = *std::max_element(completed.begin(), completed.end());
  // Progress compared without the admission bit: a survivor that did not
  // admit is not behind (admission_done tells it the admission is over).
  const std::int64_t agreed_point = agreed_progress / 2;
  change.agreed_round = agreed_point / kMaxParts;
  change.agreed_parts = static_cast<int>(agreed_point % kMaxParts);
  change.admission_done = agreed_progress % 2 == 1;
  change.state_from = -1;
  for (int p = 0; p < n; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (!view[i]) {
      change.left.push_back(members_[i].name);
      continue;
    }
    const int rank = static_cast<int>(remaining.size());
    if (completed[i] / 2 == agreed_point && change.state_from < 0) change.state_from = rank;
    if (completed[i] / 2 < agreed_point) change.behind_ranks.push_back(rank);
    remaining.push_back(members_[i]);
  }
  change.behind = progress_ / 2 < agreed_point;
  members_ = std::move(remaining);
  ++epoch_;
  if (!view[0]) {  // the door's keeper is gone: the new rank 0 opens the next one
    ++door_generation_;
    if (me == kept_ranks.front()) open_door();
  }
  change.epoch = epoch_;
  change.why = why;
  follow_leaders(false);  // a loss meanwhile: the next recovery, in this new epoch, finds the same round
  change.seconds = since(start);
  return change;
}

}  // namespace diloco::comm
