// The group's state as one site leader sends it to another (a site that
// joins a group already training, or a survivor behind after a loss): what
// a site needs to train on from here. Its header is received first and
// checked against the receiving site's own model before anything is
// allocated from it; the whole message is decoded and checked before the
// site changes any of its own state, so a bad message (another model, a
// truncated or tampered one) leaves the site as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace diloco::outer {

struct GroupState {
  std::int64_t round = 0;       // the newest round it completed
  std::int64_t inner_step = 0;  // the sender's inner step counter (LR schedule, data position)
  bool admit_next = false;      // delayed overlap: the next round drains for a newcomer
  std::vector<bool> started;    // per fragment: its outer optimizer has stepped
  std::vector<float> global;    // the global params
  std::vector<std::vector<float>> outer;  // per fragment: its outer optimizer's state
  std::vector<double> schedule;  // the H schedule's state (scheduler.h)
  std::string inner;             // data parallelism: the inner optimizer's state; else empty
};

// What the receiving site's model fixes about a state it can take.
struct GroupStateShape {
  std::size_t params = 0;
  std::vector<std::size_t> outer_values;  // per fragment
  bool data_parallel = false;             // only then may a state carry the inner optimizer's
  std::size_t min_schedule_values = 0, max_schedule_values = 0;
};

// The header's bytes: what a receiver reads first.
std::size_t group_state_header_bytes();

std::vector<std::byte> encode_group_state(const GroupState& state);

// The whole message's bytes from its header (at least
// group_state_header_bytes()), once the header fits `shape`; throws
// comm::CommError naming what does not fit.
std::size_t group_state_bytes(std::span<const std::byte> header, const GroupStateShape& shape);

// Decodes a whole message; throws comm::CommError when it does not fit
// `shape` or has another size than its header says.
GroupState decode_group_state(std::span<const std::byte> bytes, const GroupStateShape& shape);

// What the leaders' messages outside the exchange (this state, a data-
// parallel step's average, a round's report) are sealed under with a key
// (security.key_file): the kind ("state", "step", "report"), the membership
// epoch, the round or step the message is of, and its sender's rank, so a
// message replayed from another epoch, step or sender fails its check.
std::string sealing_context(const char* kind, int epoch, std::int64_t round, int sender);

}  // namespace diloco::outer
