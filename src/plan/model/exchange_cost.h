// The one model of an exchange between site leaders (no torch, no MPI):
// which algorithm `compression.exchange = "auto"` takes, the bytes every
// site sends, and the time on each site's own uplink and downlink. The
// exchange (outer/exchange.cpp) asks it which algorithm to run, the planner
// what a round's exchange costs; the link emulator shapes the same per-site
// links message by message, and a test holds the two within 10%.
//
// A site's uplink carries everything it sends, its downlink everything it
// receives, whoever the peer; a message between two sites takes the larger
// of their latencies. An all-gather (every site's payload to every other at
// once) lasts as long as its most loaded link: site i sends its payload
// n - 1 times over its uplink and receives the n - 1 others over its
// downlink, so T = max_i max((n-1) p_i / up_i, sum_{j!=i} p_j / down_i) plus
// one latency. A ring hop (every site to the next at once) lasts as long as
// its slowest pair. The exchange: a report gather (weights, with the key's
// tag), then all-gather of the payload in parts of at most part_bytes (one
// latency each), or the ring's n - 1 hops of a 1/n chunk and an all-gather of
// the reduced chunks.
#pragma once

#include <cstddef>
#include <vector>

#include "diloco/compression/codec.h"

namespace diloco::plan {

// One site's access link; 0 bytes/s: unlimited.
struct SiteLink {
  double latency_s = 0.0;
  double up_bytes_per_s = 0.0;
  double down_bytes_per_s = 0.0;
};

enum class Algorithm { kAllGather, kRing };
enum class AlgorithmSetting { kAuto, kAllGather, kRing };  // compression.exchange

// What the exchange puts on the wire besides payloads.
inline constexpr double kMacBytes = 32.0;     // HMAC-SHA256 tag per message with security.key_file
inline constexpr double kReportBytes = 40.0;  // a site's report: weight, steps, norm, status, epoch
inline constexpr double kRoundReportBytes = 104.0;  // a leader's metrics at a round's end (13 doubles)

// The algorithm `setting` runs for `sites` sites: auto takes the ring when it
// sends fewer bytes (2 (n-1) chunks of 1/n against n-1 whole payloads), never
// for 2 sites (the same bytes, rounded once more) and never with a key (a
// forged message must be left out alone, which only the all-gather can).
Algorithm choose_algorithm(AlgorithmSetting setting, int sites, bool keyed, std::size_t whole_payload,
                           std::size_t chunk_payload);

struct ExchangeShape {
  std::size_t values = 0;                     // pseudo-gradient values exchanged
  const compression::Codec* codec = nullptr;  // sizes the payloads
  AlgorithmSetting setting = AlgorithmSetting::kAuto;
  bool keyed = false;                         // security.key_file
  std::size_t part_bytes = std::size_t{8} << 20;  // sync.part_bytes: the all-gather's part size
};

struct ExchangeCost {
  Algorithm algorithm = Algorithm::kAllGather;
  double seconds = 0.0;         // report gather and payloads
  double report_seconds = 0.0;  // of it, the report gather
  double bytes = 0.0;           // sent by all sites together
  std::vector<double> sent;     // per site
  int parts = 1;                // all-gather parts
};

// An all-gather of `payload[i]` bytes from every site i, all copies at once
// (a collective: the round's report).
double all_gather_seconds(const std::vector<SiteLink>& links, const std::vector<double>& payload);

// The same as the exchange sends its payloads (comm::shifted_all_gather):
// n - 1 shifts, site i sending to i + j and receiving from i - j in shift j.
// A transfer starts once both its sites have finished the shift before and
// takes the larger latency of the two, then its bytes at the slower of the
// sender's uplink and the receiver's downlink; a site's shift ends when its
// send and its receive have. The last site's end.
double shifted_gather_seconds(const std::vector<SiteLink>& links, const std::vector<double>& payload);

// One ring hop: every site sends `bytes` to the next at once.
double ring_hop_seconds(const std::vector<SiteLink>& links, double bytes);

ExchangeCost exchange_cost(const std::vector<SiteLink>& links, const ExchangeShape& shape);

}  // namespace diloco::plan
