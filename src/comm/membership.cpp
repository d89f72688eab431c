// Joining through the name service, admitting at round boundaries, and
// recovering from a lost member by majority (see membership.h).
#include "comm/membership.h"
#include "comm/membership_wire.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

namespace diloco::comm {
namespace {

// Tags on the leaders' communicator, above any the exchange or probes use.
constexpr int kAlarmTag = 31001;
constexpr int kViewTag = 31002;
constexpr int kGroupTag = 31003;

enum Decision : int { kWait = 0, kAdmit = 1, kStart = 2, kFail = 3 };

using namespace wire;

// Connects to `port` alone, giving up after `timeout_s` (a door whose keeper
// is gone never answers; MPI has no timeout of its own). A connect that
// gives up is left blocked on its thread: the process is ending anyway.
MPI_Comm connect_within(const std::string& port, double timeout_s, const std::string& what) {
  auto result = std::make_shared<std::promise<MPI_Comm>>();
  auto done = result->get_future();
  std::thread([port, result] {
    MPI_Comm inter = MPI_COMM_NULL;
    const int rc = MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    result->set_value(rc == MPI_SUCCESS ? inter : MPI_COMM_NULL);
  }).detach();
  if (done.wait_for(std::chrono::duration<double>(timeout_s)) != std::future_status::ready)
    throw JoinError("no answer from " + what + " within " + std::to_string(static_cast<int>(timeout_s)) +
                    " s (its keeper may be gone; is the run still alive?)");
  MPI_Comm inter = done.get();
  if (inter == MPI_COMM_NULL) throw JoinError("cannot connect to " + what + " (MPI_Comm_connect failed)");
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  return inter;
}

}  // namespace

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
  try {
    enter();
  } catch (...) {
    close_door();  // the door's thread must not outlive a failed join
    throw;
  }
}

void Membership::enter() {
  const auto start = Clock::now();
  for (;;) {
    // The highest door published is the current keeper's.
    std::string door;
    for (int g = 0;; ++g) {
      char port[MPI_MAX_PORT_NAME] = {0};
      if (MPI_Lookup_name(name("door-" + std::to_string(g)).c_str(), MPI_INFO_NULL, port) != MPI_SUCCESS) break;
      door = port;
    }
    if (!door.empty()) {
      join(door);
      break;
    }
    if (config_.hello.index == config_.founder) {
      found();
      break;
    }
    if (since(start) > config_.join_timeout_s)
      throw JoinError("no group to join for run \"" + config_.run_id + "\" within rendezvous.join_timeout_s = " +
                      std::to_string(static_cast<int>(config_.join_timeout_s)) + " s (site " +
                      std::to_string(config_.founder) + " founds it; is it launched, with the same run id and server?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  leaders_->set_deadline(config_.deadline_s, kAlarmTag);
  if (!started_) wait_for_sites();
}

Membership::~Membership() { close_door(); }

void Membership::found() {
  MPI_Comm self = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Comm_dup(MPI_COMM_SELF, &self));
  owned_ = std::make_unique<MpiCommunicator>(self);
  leaders_ = owned_.get();
  members_ = {config_.hello};
  open_door();
}

void Membership::join(const std::string& door_port) {
  const double timeout = config_.join_timeout_s;
  MPI_Comm door = connect_within(door_port, timeout, "the group's door");
  SiteHello hello = config_.hello;
  hello.keyed = config_.auth != nullptr;
  if (hello.keyed) hello.nonce = MessageAuth::random_bytes(32);
  const std::string hello_bytes = encode_hello(hello);
  config_.hello = hello;
  send_text(door, 0, kHelloTag, hello_bytes);
  if (hello.keyed) answer_challenge(door, hello_bytes);
  std::string reply;
  if (!receive_text(door, 0, kReplyTag, timeout, reply))
    throw JoinError("the group did not answer this site's hello within rendezvous.join_timeout_s");
  if (reply.empty() || reply[0] != '+') throw JoinError("refused by the group: " + (reply.empty() ? "" : reply.substr(1)));
  MPI_Comm inter = connect_within(reply.substr(1), timeout, "the group");
  MPI_Comm merged = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Intercomm_merge(inter, 1, &merged));
  MPI_Comm_free(&inter);
  MPI_Comm_free(&door);
  owned_ = std::make_unique<MpiCommunicator>(merged);
  leaders_ = owned_.get();
  share_roster();
  joined_late_ = started_;
}

// Every member learns rank 0's view: epoch, door, whether training started,
// and who is who.
void Membership::share_roster() {
  std::string roster;
  if (leaders_->rank() == 0) {
    put_u32(roster, static_cast<std::uint32_t>(epoch_));
    put_u32(roster, static_cast<std::uint32_t>(door_generation_));
    put_u32(roster, started_ ? 1 : 0);
    put_u32(roster, static_cast<std::uint32_t>(members_.size()));
    for (const auto& m : members_) put_text(roster, encode_hello(m));
  }
  std::uint64_t size = roster.size();
  broadcast_values(*leaders_, std::span<std::uint64_t>(&size, 1), 0);
  roster.resize(size);
  leaders_->broadcast(std::as_writable_bytes(std::span<char>(roster.data(), roster.size())), 0);
  if (leaders_->rank() == 0) return;
  Reader r{roster};
  epoch_ = static_cast<int>(r.u32());
  door_generation_ = static_cast<int>(r.u32());
  started_ = r.u32() != 0;
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
      if (!knocks.empty()) decision = kAdmit;
      else if (size >= config_.expected_sites || (timed_out && size >= config_.min_sites)) decision = kStart;
      else if (timed_out) decision = kFail;
    }
    broadcast_values(*leaders_, std::span<int>(&decision, 1), 0);
    if (decision == kAdmit) {
      admit(std::move(knocks));
    } else if (decision == kStart) {
      started_ = true;
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

MembershipChange Membership::admit_waiting() {
  newcomers_.clear();
  std::vector<Knock> knocks;
  MembershipChange change;
  if (leaders_->rank() == 0) {
    knocks = take_knocks();
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    change.refused = std::move(refused_);
    refused_.clear();
  }
  int count = static_cast<int>(knocks.size());
  broadcast_values(*leaders_, std::span<int>(&count, 1), 0);
  if (count == 0) {
    change.epoch = epoch_;
    change.why = "refused at the door";
    return change;
  }
  auto start = Clock::now();
  for (const auto& k : knocks) start = std::min(start, k.at);  // rank 0: since the first knock
  change.joined = admit(std::move(knocks));
  if (leaders_->rank() == 0) {  // what admit() refused (a taken index, another model)
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    change.refused.insert(change.refused.end(), refused_.begin(), refused_.end());
    refused_.clear();
  }
  change.epoch = epoch_;
  change.why = "joined";
  change.seconds = since(start);
  return change;
}

std::vector<std::string> Membership::admit(std::vector<Knock> knocks) {
  newcomers_.clear();
  // Rank 0 refuses what cannot join (its reply says why), then tells the
  // others how many it lets in.
  std::vector<Knock> admitted;
  for (auto& k : knocks) {
    std::string refusal;
    const auto same_index = [&](const SiteHello& m) { return m.index == k.hello.index; };
    if (std::any_of(members_.begin(), members_.end(), same_index) ||
        std::any_of(admitted.begin(), admitted.end(), [&](const Knock& a) { return same_index(a.hello); }))
      refusal = "site index " + std::to_string(k.hello.index) + " is taken (rendezvous.site must differ per site)";
    else if (k.hello.signature != members_.front().signature)
      refusal = "its model (" + k.hello.signature + ") differs from the group's (" + members_.front().signature + ")";
    if (refusal.empty()) {
      admitted.push_back(std::move(k));
      continue;
    }
    send_text(k.door, 0, kReplyTag, "!" + refusal);
    MPI_Comm_free(&k.door);
    std::lock_guard<std::mutex> lock(knocks_mutex_);
    refused_.push_back(k.hello.name + ": " + refusal);
  }
  int count = static_cast<int>(admitted.size());
  broadcast_values(*leaders_, std::span<int>(&count, 1), 0);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    char port[MPI_MAX_PORT_NAME] = {0};
    if (leaders_->rank() == 0) {
      DILOCO_MPI_CHECK(MPI_Open_port(MPI_INFO_NULL, port));
      send_text(admitted[static_cast<std::size_t>(i)].door, 0, kReplyTag, std::string("+") + port);
    }
    MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
    MPI_Comm old = leaders_->handle();
    DILOCO_MPI_CHECK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, old, &inter));
    DILOCO_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));
    MPI_Comm_free(&inter);
    leaders_->replace(merged);
    MPI_Comm_free(&old);
    if (leaders_->rank() == 0) {
      MPI_Close_port(port);
      MPI_Comm_free(&admitted[static_cast<std::size_t>(i)].door);
      members_.push_back(admitted[static_cast<std::size_t>(i)].hello);
    }
    ++epoch_;
    share_roster();
    names.push_back(members_.back().name);
    newcomers_.push_back(leaders_->size() - 1);
  }
  if (leaders_->rank() == 0) reopen_door();
  return names;
}

MembershipChange Membership::recover(const std::string& why) {
  const auto start = Clock::now();
  MPI_Comm old = leaders_->handle();
  const int n = leaders_->size();
  const int me = leaders_->rank();
  // 1. Alarm every member and listen for theirs: who answers within ping_s
  // is alive. Receives still open afterwards are cancelled, so a stale
  // member that wakes up later cannot write into freed memory.
  static std::int64_t alarm = 0;
  alarm = epoch_;
  std::vector<std::int64_t> heard(static_cast<std::size_t>(n), 0);
  std::vector<MPI_Request> receives(static_cast<std::size_t>(n), MPI_REQUEST_NULL);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    MPI_Request send;
    DILOCO_MPI_CHECK(MPI_Isend(&alarm, 1, MPI_INT64_T, p, kAlarmTag, old, &send));
    MPI_Request_free(&send);
    DILOCO_MPI_CHECK(MPI_Irecv(&heard[static_cast<std::size_t>(p)], 1, MPI_INT64_T, p, kAlarmTag, old,
                               &receives[static_cast<std::size_t>(p)]));
  }
  std::vector<unsigned char> alive(static_cast<std::size_t>(n), 0);
  alive[static_cast<std::size_t>(me)] = 1;
  const auto listen = [&](std::vector<MPI_Request>& requests, std::vector<unsigned char>& done) {
    const auto t0 = Clock::now();
    for (;;) {
      bool all = true;
      for (std::size_t p = 0; p < requests.size(); ++p) {
        if (requests[p] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        DILOCO_MPI_CHECK(MPI_Test(&requests[p], &flag, MPI_STATUS_IGNORE));
        if (flag) done[p] = 1;
        else all = false;
      }
      if (all || since(t0) > config_.ping_s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& r : requests)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
  };
  listen(receives, alive);

  // 2. Agree: every survivor sends its view to the others it heard; all
  // views must be the same (an asymmetric cut can make them differ, and a
  // communicator built from differing views would hang).
  std::vector<std::vector<unsigned char>> views(static_cast<std::size_t>(n));
  std::vector<MPI_Request> view_receives(static_cast<std::size_t>(n), MPI_REQUEST_NULL);
  std::vector<MPI_Request> view_sends;
  for (int p = 0; p < n; ++p) {
    if (p == me || !alive[static_cast<std::size_t>(p)]) continue;
    views[static_cast<std::size_t>(p)].resize(static_cast<std::size_t>(n));
    MPI_Request send;
    // The send is never waited for (a peer may be gone): its buffer lives
    // as long as the process, as `alarm` does, since the transport may still
    // write from it while MPI_Finalize runs, after this object is gone.
    static std::deque<std::vector<unsigned char>> sent_views;
    sent_views.push_back(alive);
    DILOCO_MPI_CHECK(MPI_Isend(sent_views.back().data(), n, MPI_UNSIGNED_CHAR, p, kViewTag, old, &send));
    view_sends.push_back(send);
    DILOCO_MPI_CHECK(MPI_Irecv(views[static_cast<std::size_t>(p)].data(), n, MPI_UNSIGNED_CHAR, p, kViewTag, old,
                               &view_receives[static_cast<std::size_t>(p)]));
  }
  std::vector<unsigned char> answered(static_cast<std::size_t>(n), 0);
  listen(view_receives, answered);
  for (auto& s : view_sends) MPI_Request_free(&s);
  // Alive is who heard the alarm and sees what this site sees; who alarmed
  // but does not answer now (a stale alarm from members that have moved on)
  // is gone.
  std::vector<unsigned char> agreed(static_cast<std::size_t>(n), 0);
  agreed[static_cast<std::size_t>(me)] = 1;
  bool differ = false;
  for (int p = 0; p < n; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (p == me || !alive[i] || !answered[i]) continue;
    if (views[i] == alive) agreed[i] = 1;
    else differ = true;
  }

  // 3. The majority rule, against the last agreed membership.
  const int survivors = static_cast<int>(std::count(agreed.begin(), agreed.end(), 1));
  if (2 * survivors <= n)
    throw MinorityError("after " + why + ", this site reached " + std::to_string(survivors) + " of the " +
                        std::to_string(n) + " sites of membership epoch " + std::to_string(epoch_) +
                        ": not a strict majority, so it stops and the others (if they are the majority) go on");
  if (differ)
    throw CommError("the surviving sites see different memberships after " + why +
                        " (an asymmetric network cut?); stopping this site", -1);
  alive = agreed;

  // 4. The survivors' communicator; the old one is left alone.
  MPI_Group all_group, kept_group;
  std::vector<int> kept;
  for (int p = 0; p < n; ++p)
    if (alive[static_cast<std::size_t>(p)]) kept.push_back(p);
  DILOCO_MPI_CHECK(MPI_Comm_group(old, &all_group));
  DILOCO_MPI_CHECK(MPI_Group_incl(all_group, survivors, kept.data(), &kept_group));
  MPI_Comm fresh = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Comm_create_group(old, kept_group, kGroupTag + epoch_, &fresh));
  MPI_Group_free(&kept_group);
  MPI_Group_free(&all_group);
  leaders_->replace(fresh);

  MembershipChange change;
  std::vector<SiteHello> remaining;
  for (int p = 0; p < n; ++p) {
    if (alive[static_cast<std::size_t>(p)]) remaining.push_back(members_[static_cast<std::size_t>(p)]);
    else change.left.push_back(members_[static_cast<std::size_t>(p)].name);
  }
  members_ = std::move(remaining);
  ++epoch_;
  if (!alive[0]) {  // the door's keeper is gone: the new rank 0 opens the next one
    ++door_generation_;
    if (me == kept.front()) open_door();
  }
  change.epoch = epoch_;
  change.why = why;
  change.seconds = since(start);
  return change;
}

}  // namespace diloco::comm
