// An all-gather for large buffers between sites, as n - 1 shifts of
// send_recv: in shift j (1..n-1) each rank sends its buffer to the rank j
// after it and receives the buffer of the rank j before it.
//
// A collective all-gather sends every copy at once, so each site's downlink
// is where n - 1 senders meet. On a shaped link that overflows the link's
// queue: packets drop, and TCP waits out its retransmission timeouts (4
// sites at 100, 50, 20 and 10 Mbit/s, int4 payloads: hundreds of drops on
// the 10 Mbit/s site's links, exchanges from 0.7 to 2.1 times their mean, a
// round of 3.5 s among rounds of 0.85). Shifted, every link carries one flow
// at a time, as a ring's steps do, and the slowest site still moves its n - 1
// copies back to back, so the exchange takes what the slowest link needs.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "comm/communicator.h"

namespace diloco::comm {

// Every rank's buffer (any length, zero allowed), indexed by rank, as
// Communicator::all_gather returns them. Shift j uses tag `tag` + j - 1.
std::vector<std::vector<std::byte>> shifted_all_gather(Communicator& comm, std::span<const std::byte> mine, int tag);

}  // namespace diloco::comm
