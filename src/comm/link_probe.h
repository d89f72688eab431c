// Active link measurement between ranks of a communicator (site leaders):
// latency from ping-pong of small messages (half the round trip, median, as
// osu_latency), bandwidth from large messages, fitted to t(S) = alpha + S/beta.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace diloco::comm {

struct LinkEstimate {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;
};

struct ProbeOptions {
  int pings = 7;                        // small round trips per pair
  int transfers = 3;                    // large one-way transfers per pair, at most
  std::size_t large_bytes = 1u << 20;
  // No further transfer starts once a pair has spent this long (the first
  // always runs), so a slow link bounds the probe's time.
  double pair_seconds = 2.0;
};

// Rounds of pairs (a < b) in which every rank appears at most once, together
// covering every pair of n ranks once: n - 1 rounds (n rounds for odd n).
std::vector<std::vector<std::pair<int, int>>> pair_rounds(int n);

// Collective over `comm`: every pair of ranks is measured; every rank gets the
// symmetric matrix (the diagonal is zero).
std::vector<std::vector<LinkEstimate>> probe_links(Communicator& comm, const ProbeOptions& options = {});

}  // namespace diloco::comm
