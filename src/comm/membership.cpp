// Entering a run (join or found), the roster every member shares, and
// admitting newcomers at round boundaries (docs/membership.md).
#include "comm/membership.h"

#include "comm/accept_stand_in.h"
#include "comm/membership_wire.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <cstdio>
#include <unistd.h>

namespace diloco::comm {
namespace {

enum Decision : int { kWait = 0, kAdmitKnocks = 1, kStart = 2, kFail = 3 };

}  // namespace

using namespace wire;

std::string encode_hello(const SiteHello& h) {
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(h.index));
  out.append(reinterpret_cast<const char*>(&h.weight), sizeof h.weight);
  put_text(out, h.name);
  put_text(out, h.signature);
  put_u32(out, h.keyed ? 1 : 0);
  put_text(out, h.nonce);
  return out;
}

SiteHello decode_hello(const std::string& bytes) {
  Reader r{bytes};
  SiteHello h;
  h.index = static_cast<int>(r.u32());
  if (bytes.size() - r.at < sizeof h.weight) throw JoinError("a hello ends early");
  std::memcpy(&h.weight, bytes.data() + r.at, sizeof h.weight);
  r.at += sizeof h.weight;
  h.name = r.text();
  h.signature = r.text();
  h.keyed = r.u32() != 0;
  h.nonce = r.text();
  if (r.at != bytes.size()) throw JoinError("a hello has trailing bytes");
  if (h.index < 0 || h.index > (1 << 20)) throw JoinError("a hello names site index " + std::to_string(h.index));
  return h;
}

Membership::Membership(JoinConfig config) : config_(std::move(config)) {
  const char* server = std::getenv("OMPI_MCA_pmix_server_uri");
  if (!server || !*server)
    throw JoinError("topology.join = \"rendezvous\" needs the run's ompi-server: launch this site with "
                    "mpirun --ompi-server file:URI_FILE (scripts/rendezvous starts the server and prints the line)");
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  // Peers of a membership die: a write to one (Open MPI's TCP transport
  // flushing to a killed site as the process ends, a door connection) must
  // fail with EPIPE, not end this process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    enter();
  } catch (...) {
    close_door();  // the door's thread must not outlive a failed join
    throw;
  }
}

Membership::~Membership() { close_door(); }

// Knocks at the published doors, newest first, until one admits this site.
// Only the founder founds, and only while no door answers: before the run
// has started at once, after it only once a live group would have
// published a new door (a recovery's bound), so a relaunched founder never
// starts a second group beside a live one.
void Membership::enter() {
  // Both clocks restart whenever a door answers: a live group that queues
  // this site (or lost its keeper meanwhile) is waited for.
  auto last_answer = Clock::now();
  const double refound_after = 2 * config_.deadline_s + 2 * config_.ping_s + 2 * kHandshakeS;
  for (;;) {
    const auto doors = published_doors();
    bool joined = false;
    for (const auto& door : doors) {
      door_answered_ = false;
      joined = knock(door);
      if (door_answered_) last_answer = Clock::now();
      if (joined) break;
    }
    if (joined) break;
    if (config_.hello.index == config_.founder && (!run_started() || since(last_answer) > refound_after)) {
      found(doors.empty() ? 0 : doors.front().generation + 1);
      break;
    }
    if (since(last_answer) > config_.join_timeout_s && !refusal_.empty()) throw JoinError(refusal_);
    if (since(last_answer) > config_.join_timeout_s)
      throw JoinError("no group answered for run \"" + config_.run_id + "\" within rendezvous.join_timeout_s = " +
                      std::to_string(static_cast<int>(config_.join_timeout_s)) + " s (" +
                      std::to_string(doors.size()) + " door names published, none answered; site " +
                      std::to_string(config_.founder) + " founds the run: is it launched, with the same run id, "
                      "server and key?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  leaders_->set_deadline(config_.deadline_s, kAlarmTag);
  if (!started_) wait_for_sites();
}

void Membership::found(int generation) {
  MPI_Comm self = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Comm_dup(MPI_COMM_SELF, &self));
  owned_ = std::make_unique<MpiCommunicator>(self);
  leaders_ = owned_.get();
  members_ = {config_.hello};
  door_generation_ = generation;
  open_door();
  joined_through_ = "founded run \"" + config_.run_id + "\" at door " + std::to_string(generation);
  leaders_->set_deadline(config_.deadline_s, kAlarmTag);
  follow_leaders(false);
}

// Names in the rendezvous are "diloco-RUN-WHAT"; with a key they end in a
// MAC of that name, so nobody without the key can publish a door that a
// keyed site would knock on first. A keyed group's door is published under
// the plain name too, where a site without the key learns why it is refused.
std::string Membership::plain_name(const std::string& what) const { return "diloco-" + config_.run_id + "-" + what; }

std::string Membership::name(const std::string& what) const {
  const std::string plain = plain_name(what);
  if (!config_.auth) return plain;
  const auto mac = config_.auth->tag(kDoorLabel, std::as_bytes(std::span<const char>(plain)));
  static const char* hex = "0123456789abcdef";
  std::string suffix;
  for (std::size_t i = 0; i < 8; ++i) {
    const auto b = static_cast<unsigned>(mac[i]);
    suffix += hex[b >> 4];
    suffix += hex[b & 15];
  }
  return plain + "-" + suffix;
}

std::string Membership::seal(const std::string& label, const std::string& what) const {
  if (!config_.auth) return "";
  const auto mac = config_.auth->tag(label, std::as_bytes(std::span<const char>(what)));
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

bool Membership::sealed(const std::string& label, const std::string& what, const std::string& mac) const {
  return config_.auth && config_.auth->verify(label, std::as_bytes(std::span<const char>(what)),
                                              std::as_bytes(std::span<const char>(mac)));
}

// Every member learns rank 0's view: epoch, door, whether training started,
// the newest completed round, and who is who.
void Membership::share_roster() {
  std::string roster;
  if (leaders_->rank() == 0) {
    put_u32(roster, static_cast<std::uint32_t>(epoch_));
    put_u32(roster, static_cast<std::uint32_t>(door_generation_));
    put_u32(roster, started_ ? 1 : 0);
    put_u32(roster, static_cast<std::uint32_t>(progress_));  // two halves: 2 x kMaxParts per round
    put_u32(roster, static_cast<std::uint32_t>(static_cast<std::uint64_t>(progress_) >> 32));
    put_u32(roster, static_cast<std::uint32_t>(left_in_batch_));
    put_u32(roster, static_cast<std::uint32_t>(members_.size()));
    for (const auto& m : members_) put_text(roster, encode_hello(m));
  }
  if (leaders_->rank() == 0) roster += seal(kRosterLabel, roster);  // keyed: who may be a member is sealed
  std::uint64_t size = roster.size();
  broadcast_values(*leaders_, std::span<std::uint64_t>(&size, 1), 0);
  roster.resize(size);
  leaders_->broadcast(std::as_writable_bytes(std::span<char>(roster.data(), roster.size())), 0);
  if (leaders_->rank() == 0) return;
  if (config_.auth) {
    const std::size_t body = roster.size() < sizeof(MacTag) ? 0 : roster.size() - sizeof(MacTag);
    if (roster.size() < sizeof(MacTag) || !sealed(kRosterLabel, roster.substr(0, body), roster.substr(body)))
      throw CommError("the group's roster failed its key check (tampered on the way?); stopping this site", 0);
    roster.resize(body);
  }
  Reader r{roster};
  epoch_ = static_cast<int>(r.u32());
  door_generation_ = static_cast<int>(r.u32());
  started_ = r.u32() != 0;
  progress_ = r.u32();
  progress_ |= static_cast<std::int64_t>(r.u32()) << 32;
  left_in_batch_ = static_cast<int>(r.u32());
  members_.resize(r.u32());
  for (auto& m : members_) m = decode_hello(r.text());
}

// Before round 1, rank 0 decides every tenth of a second: admit who knocked,
// start (all expected sites, or enough after the timeout), fail, or wait.
void Membership::wait_for_sites() {
  const auto start = Clock::now();
  for (;;) {
    int decision = kWait;
    std::vector<Knock> knocks;
    if (leaders_->rank() == 0) {
      knocks = take_knocks();
      const int size = leaders_->size();
      const bool timed_out = since(start) > config_.join_timeout_s;
      if (!knocks.empty()) decision = kAdmitKnocks;
      else if (size >= config_.expected_sites || (timed_out && size >= config_.min_sites)) decision = kStart;
      else if (timed_out) decision = kFail;
    }
    try {
      decision = from_keeper(decision);
      if (decision == kAdmitKnocks) admit(std::move(knocks));
    } catch (const PeerLost& e) {  // a site lost before round 1: the others go on waiting without it
      if (leaders_->rank() == 0) requeue(knocks, 0);  // (empty when admit() took them: it requeues its own)
      recover(std::string("a loss before round 1 (") + e.what() + ")");
      continue;
    }
    if (decision == kAdmitKnocks) {
      continue;
    } else if (decision == kStart) {
      started_ = true;
      // Marks the run as started, so a founder launched again later joins
      // (or waits for) the live group instead of founding another.
      if (leaders_->rank() == 0) MPI_Publish_name(name("started").c_str(), MPI_INFO_NULL, "1");
      newcomers_.clear();  // they start with everyone: nothing to catch up on
      return;
    } else if (decision == kFail) {
      throw JoinError("only " + std::to_string(leaders_->size()) + " sites joined within rendezvous.join_timeout_s; "
                      "rendezvous.min_sites is " + std::to_string(config_.min_sites));
    } else if (leaders_->rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// What rank 0 decided, learned in a sum every member takes part in (the
// others add 0), so a member lost meanwhile is noticed by everyone (the
// deadline) before anything depends on it, never inside MPI's accept.
int Membership::from_keeper(int value) {
  double v = leaders_->rank() == 0 ? value : 0.0;
  leaders_->all_reduce_sum(std::span<double>(&v, 1));
  return static_cast<int>(v);
}

// A member was lost before these knocks were told a port: they wait at the
// door for the next admission, after the recovery (rank 0; a no-op elsewhere).
void Membership::requeue(std::vector<Knock>& knocks, std::size_t from) {
  std::lock_guard<std::mutex> lock(knocks_mutex_);
  for (std::size_t k = knocks.size(); k-- > from;) knocks_.push_front(std::move(knocks[k]));
  knocks.clear();
}

// How many knocks rank 0 brings to an admission, learned by every member;
// on a loss they wait at the door again.
int Membership::count_from_keeper(std::vector<Knock>& knocks) {
  try {
    return from_keeper(static_cast<int>(knocks.size()));
  } catch (const PeerLost&) {
    requeue(knocks, 0);
    throw;
  }
}

MembershipChange Membership::admit_waiting() {
  newcomers_.clear();
  std::vector<Knock> knocks;
  if (leaders_->rank() == 0) knocks = take_knocks();
  const int count = count_from_keeper(knocks);
  MembershipChange change;
  auto start = Clock::now();
  for (const auto& k : knocks) start = std::min(start, k.at);  // rank 0: since the first knock
  if (count > 0) change.joined = admit(std::move(knocks));
  if (leaders_->rank() == 0) {  // refusals at the door and by admit() (a taken index, another model)
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    change.refused = std::move(refused_);
    refused_.clear();
  }
  change.epoch = epoch_;
  change.why = change.joined.empty() ? "refused at the door" : "joined";
  change.seconds = change.joined.empty() ? 0.0 : since(start);
  return change;
}

// Rank 0 refuses what cannot join, then, one newcomer at a time, tells it
// the port and waits (timed) for its "ready"; only a newcomer that answered
// is accepted, by every member at once, under a guard. A newcomer that gave
// up or died while queued is dropped here and stalls nobody.
std::vector<std::string> Membership::admit(std::vector<Knock> knocks) {
  newcomers_.clear();
  std::vector<Knock> candidates;
  for (auto& k : knocks) {
    const auto same_index = [&](const SiteHello& m) { return m.index == k.hello.index; };
    std::string refusal;
    if (std::any_of(members_.begin(), members_.end(), same_index) ||
        std::any_of(candidates.begin(), candidates.end(), [&](const Knock& c) { return same_index(c.hello); }))
      refusal = "site index " + std::to_string(k.hello.index) + " is taken (rendezvous.site must differ per site)";
    else if (k.hello.signature != members_.front().signature)
      refusal = "its model (" + k.hello.signature + ") differs from the group's (" + members_.front().signature + ")";
    if (refusal.empty()) {
      candidates.push_back(std::move(k));
      continue;
    }
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    refuse(k, refusal);
  }
  const int count = count_from_keeper(candidates);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    left_in_batch_ = count - i - 1;
    try {
      if (const auto joined = admit_one(leaders_->rank() == 0 ? &candidates[static_cast<std::size_t>(i)] : nullptr);
          !joined.empty())
        names.push_back(joined);
    } catch (const PeerLost&) {
      requeue(candidates, static_cast<std::size_t>(i) + 1);
      throw;
    }
  }
  return names;
}

// One admission of a batch, on every member (and on the sites admitted
// earlier in the batch, which take part in the rest): rank 0 tells `knock`
// the port and waits for its "ready"; only then does everyone accept.
// Returns the admitted site's name, or "" when it did not answer.
std::string Membership::admit_one(Knock* knock) {
  char port[MPI_MAX_PORT_NAME] = {0};
  int ready = 0;
  if (knock) {
    DILOCO_MPI_CHECK(MPI_Open_port(MPI_INFO_NULL, port));
    std::string answer;
    ready = knock->socket.send(kAdmit + std::string(port) + seal(kPortLabel, knock->session + port)) &&
            knock->socket.receive(answer, std::min(kHandshakeS, config_.deadline_s / 2)) && !answer.empty() &&
            answer[0] == kReady &&
            (!config_.auth || sealed(kReadyLabel, knock->session + port, answer.substr(1)));
    if (!ready) {
      MPI_Close_port(port);
      std::lock_guard<std::mutex> lock(knocks_mutex_);
      refused_.push_back(knock->hello.name + ": gave up or left before its admission");
    }
  }
  try {
    ready = from_keeper(ready);
  } catch (const PeerLost&) {  // the newcomer has the port: it gives up (exit 3) and is launched again
    if (knock) MPI_Close_port(port);
    throw;
  }
  if (!ready) return "";
  MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
  MPI_Comm old = leaders_->handle();
  std::string stood_in;
  {
    // Should the newcomer die or freeze before it connects, a stand-in
    // connects in its place (keeper), so the accept returns on every member.
    AcceptStandIn stand_in(knock ? &knock->socket : nullptr, port, config_.deadline_s);
    OverrunGuard guard("admitting a site that answered ready", config_.deadline_s + kHandshakeS + kStandInS);
    DILOCO_MPI_CHECK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, old, &inter));
    stood_in = stand_in.why();
  }
  // Whoever connected must be the newcomer (keyed: hold the handshake's
  // session), alive a moment before the merge.
  int proven = knock ? check_channel(inter, knock->session + port) : 0;
  proven = from_keeper(proven);
  if (!proven) {
    MPI_Comm_free(&inter);
    if (!knock) return "";
    MPI_Close_port(port);
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    refused_.push_back(knock->hello.name + (!stood_in.empty() ? ": gone after its ready (" + stood_in +
                                                                    "); a stand-in took its place in the accept"
                                            : config_.auth ? ": the party on its MPI connection did not prove the "
                                                             "key (a relay of its handshake?)"
                                                           : ": the party on its MPI connection did not answer"));
    return "";
  }
  {
    OverrunGuard guard("merging with the admitted site", config_.deadline_s + kHandshakeS);
    DILOCO_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));
  }
  MPI_Comm_free(&inter);
  leaders_->replace(merged);
  // Every member took part in this admission, so nothing hangs on the old
  // communicator; freed, it is not among the dynamic communicators that
  // MPI_Finalize disconnects one by one (one whose peer is gone never
  // completes).
  MPI_Comm_free(&old);
  if (knock) MPI_Close_port(port);
  // Every member has the newcomer's slot before the roster fills it in (a
  // loss during the roster recovers over the merged communicator).
  members_.push_back(knock ? knock->hello : SiteHello{});
  ++epoch_;
  share_roster();
  newcomers_.push_back(leaders_->size() - 1);
  follow_leaders(true);
  return members_.back().name;
}

}  // namespace diloco::comm
