// The newcomer's side of joining (docs/membership.md, "Joining"): find the
// doors published for the run, knock on the newest that answers, prove the
// key, wait queued until a round boundary, then connect when told to.
#include <cstdio>

#include "comm/membership.h"
#include "comm/membership_wire.h"

namespace diloco::comm {

using namespace wire;

// Every door name answered by the name service, newest first. Names of
// keepers that are gone stay published (kill -9 leaves them; a stopped
// keeper withdraws its own), so the scan goes on past gaps. A keyed site
// tries the keyed names first (nobody without the key can publish them),
// then the plain ones, where a group with another key (or none) refuses it
// with the reason, and a door that cannot prove the key is never joined.
std::vector<Membership::Door> Membership::published_doors() const {
  std::vector<Door> doors;
  for (const bool keyed : {true, false}) {
    if (keyed && !config_.auth) continue;
    std::vector<Door> found;
    for (int g = 0, missing = 0; missing < kDoorGap; ++g) {
      char endpoint[MPI_MAX_PORT_NAME] = {0};
      const std::string what = "door-" + std::to_string(g);
      if (MPI_Lookup_name((keyed ? name(what) : plain_name(what)).c_str(), MPI_INFO_NULL, endpoint) != MPI_SUCCESS) {
        ++missing;
        continue;
      }
      missing = 0;
      found.insert(found.begin(), Door{g, endpoint});
    }
    doors.insert(doors.end(), found.begin(), found.end());
  }
  return doors;
}

bool Membership::run_started() const {
  char value[MPI_MAX_PORT_NAME] = {0};
  return MPI_Lookup_name(name("started").c_str(), MPI_INFO_NULL, value) == MPI_SUCCESS;
}

bool Membership::knock(const Door& door) {
  const auto step = [this](const char* what, const std::string& port = "") {
    if (config_.at_join_step) config_.at_join_step(what, port);
  };
  DoorSocket socket = DoorSocket::connect(door.endpoint, 2.0);
  if (!socket.open()) return false;
  SiteHello hello = config_.hello;
  hello.keyed = config_.auth != nullptr;
  if (hello.keyed) hello.nonce = MessageAuth::random_bytes(32);
  const std::string hello_bytes = encode_hello(hello);
  config_.hello = hello;
  if (!socket.send(kHello + hello_bytes)) return false;
  step("hello");
  std::string session;
  if (hello.keyed) {
    session = answer_challenge(socket, hello_bytes);
    if (session.empty()) return false;
  }
  // Queued until the group's next round boundary: the door's keepalives say
  // it is alive, so a long round (or the group's own recovery) is waited
  // out; silence means its keeper is gone and another door is tried.
  bool queued = false;
  auto heard = Clock::now();
  for (;;) {
    std::string frame;
    bool closed = false;
    if (!socket.receive(frame, 0.5, nullptr, &closed)) {
      const double silence = queued ? std::max(config_.deadline_s, 3 * kKeepAliveS) : kHandshakeS;
      if (closed || since(heard) > silence) return false;
      continue;
    }
    heard = Clock::now();
    door_answered_ = true;
    if (frame.empty()) return false;
    const std::string body = frame.substr(1);
    if (frame[0] == kRefused) throw JoinError("refused by the group: " + body);
    if (frame[0] == kEnded) {
      // Keyed: unsealed, it is not the group's word (a squatted name): the
      // door is tried as gone.
      const bool tagged = hello.keyed && body.size() >= sizeof(MacTag);
      const std::string what = tagged ? body.substr(0, body.size() - sizeof(MacTag)) : body;
      if (hello.keyed && (!tagged || !sealed(kEndedLabel, session + what, body.substr(what.size())))) return false;
      throw RunEnded(what);
    }
    if (frame[0] == kQueued) {
      if (!queued) step("queued");
      if (!queued) std::printf("knocked at door %d of run \"%s\": queued until the group's next round boundary\n",
                               door.generation, config_.run_id.c_str());
      std::fflush(stdout);
      queued = true;
    } else if (frame[0] == kAdmit) {
      const std::string port = hello.keyed ? body.substr(0, body.size() - sizeof(MacTag)) : body;
      if (hello.keyed && (body.size() < sizeof(MacTag) || !sealed(kPortLabel, session + port, body.substr(port.size()))))
        throw JoinError("the door's admission is not sealed with the run's key (a relay, or another run?)");
      step("port", port);
      if (!socket.send(kReady + seal(kReadyLabel, session + port))) return false;
      step("ready", port);
      MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
      {
        OverrunGuard guard("connecting to the group that admitted this site", config_.deadline_s + kHandshakeS);
        DILOCO_MPI_CHECK(MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
      }
      MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
      step("connected", port);
      if (!prove_channel(inter, session + port))
        throw CommError("the group that admitted this site did not ask it to prove itself on the connection", 0);
      {
        OverrunGuard guard("merging with the group that admitted this site", config_.deadline_s + kHandshakeS);
        DILOCO_MPI_CHECK(MPI_Intercomm_merge(inter, 1, &merged));
      }
      MPI_Comm_free(&inter);
      step("merged", port);
      owned_ = std::make_unique<MpiCommunicator>(merged);
      leaders_ = owned_.get();
      leaders_->set_deadline(config_.deadline_s, kAlarmTag);
      share_roster();
      follow_leaders(true);
      // Sites admitted after this one in the same batch: it takes part.
      while (left_in_batch_ > 0) {
        --left_in_batch_;
        admit_one(nullptr);
      }
      newcomers_.clear();
      joined_late_ = started_;
      joined_through_ = "door " + std::to_string(door.generation) + " of run \"" + config_.run_id + "\"";
      return true;
    } else if (frame[0] != kAlive) {
      return false;
    }
  }
}

// With a key, the door challenges the newcomer: it sends its own nonce with
// the HMAC of the newcomer's (the group proves the key first); the newcomer
// answers with the HMAC of that nonce and its hello. Returns the session
// (both nonces) that later frames are sealed with, or "" when the door
// did not answer (tried as gone).
// Until the door has proved the key, nothing it says is final: a refusal,
// a malformed challenge or a wrong proof (a group with another key, or a
// name squatted on the server) is remembered and the door tried as gone;
// when no door admits this site, the remembered reason is its error.
std::string Membership::answer_challenge(DoorSocket& door, const std::string& hello_bytes) {
  std::string frame;
  if (!door.receive(frame, kHandshakeS)) return "";  // (an unproven answer does not count as a live group)
  if (!frame.empty() && frame[0] == kRefused) {
    refusal_ = "refused by the group: " + frame.substr(1);
    return "";
  }
  if (frame.size() != 1 + 32 + sizeof(MacTag) || frame[0] != kChallenge) {
    refusal_ = "a door's key challenge is malformed (another program on the rendezvous?)";
    return "";
  }
  const std::string nonce = frame.substr(1, 32);
  // Answered either way, so a group with another key learns at once why.
  door.send(kResponse + seal(kJoinLabel, nonce + hello_bytes));
  if (!sealed(kAdmitLabel, config_.hello.nonce, frame.substr(33))) {
    refusal_ = "refused: the group's key does not match this site's (security.key_file), or another run "
               "answered at the rendezvous";
    return "";
  }
  return config_.hello.nonce + nonce;
}

}  // namespace diloco::comm
