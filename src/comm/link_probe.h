// Active link measurement between ranks of a communicator (site leaders):
// latency from ping-pong of small messages (half the round trip, median, as
// osu_latency), bandwidth from large messages, fitted to t(S) = alpha + S/beta.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.h"

namespace diloco::comm {

struct LinkEstimate {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;
};

struct ProbeOptions {
  int pings = 7;                        // small round trips per pair
  int transfers = 3;                    // large one-way transfers per pair
  std::size_t large_bytes = 1u << 20;
};

// Collective over `comm`: every pair of ranks is measured; every rank gets the
// symmetric matrix (the diagonal is zero).
std::vector<std::vector<LinkEstimate>> probe_links(Communicator& comm, const ProbeOptions& options = {});

}  // namespace diloco::comm
