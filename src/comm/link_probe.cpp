// Pairwise probing in rounds where every rank is in at most one pair (so each
// runs one transfer at a time and the pairs of a round run at once); results
// are shared with one all-gather at the end.
#include "comm/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace diloco::comm {
namespace {

constexpr int kPingTag = 7001;
constexpr int kDataTag = 7002;
constexpr int kAckTag = 7003;

// What a rank times is the link plus delays that are not the link (the peer
// descheduled, a sleep that overshoots), which only ever add: the fastest
// repetition is the link's own time, as ping's minimum round trip is.
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Rank `me` measures its link to `peer` (me < peer leads the exchange).
LinkEstimate measure(Communicator& comm, int peer, bool lead, const ProbeOptions& o) {
  std::vector<std::byte> small(8), large(o.large_bytes);
  std::vector<double> rtt, transfer;
  for (int i = 0; i < o.pings; ++i) {
    if (lead) {
      const double t0 = now_s();
      comm.send(small, peer, kPingTag);
      comm.recv(small, peer, kPingTag);
      rtt.push_back(now_s() - t0);
    } else {
      comm.recv(small, peer, kPingTag);
      comm.send(small, peer, kPingTag);
    }
  }
  // At least one transfer; more while the pair is inside its time budget.
  // The leader decides and says so in its acknowledgement's first byte.
  const double start = now_s();
  for (int i = 0; i < o.transfers; ++i) {
    std::byte more{0};
    if (lead) {
      const double t0 = now_s();
      comm.send(large, peer, kDataTag);
      comm.recv(small, peer, kAckTag);
      transfer.push_back(now_s() - t0);
      more = std::byte{static_cast<unsigned char>(i + 1 < o.transfers && now_s() - start < o.pair_seconds)};
      comm.send(std::span<const std::byte>(&more, 1), peer, kAckTag);
    } else {
      comm.recv(large, peer, kDataTag);
      comm.send(small, peer, kAckTag);
      comm.recv(std::span<std::byte>(&more, 1), peer, kAckTag);
    }
    if (more == std::byte{0}) break;
  }
  LinkEstimate e;
  if (!lead) return e;
  e.latency_s = fastest(rtt) / 2.0;
  // A transfer costs one latency plus the bytes; its small acknowledgement one more latency.
  const double payload_s = fastest(transfer) - 2.0 * e.latency_s;
  e.bandwidth_bytes_per_s = payload_s > 0.0 ? static_cast<double>(o.large_bytes) / payload_s : 0.0;
  return e;
}

}  // namespace

std::vector<std::vector<std::pair<int, int>>> pair_rounds(int n) {
  // The circle method: with m = n rounded up to even, rank m-1 stays put and
  // the others rotate; in round k, k pairs with m-1 and k-i with k+i.
  const int m = n + n % 2;
  std::vector<std::vector<std::pair<int, int>>> rounds;
  for (int k = 0; k + 1 < m; ++k) {
    std::vector<std::pair<int, int>> round;
    auto add = [&](int a, int b) {
      if (a < n && b < n) round.emplace_back(std::min(a, b), std::max(a, b));
    };
    add(k, m - 1);
    for (int i = 1; i < m / 2; ++i) add((k - i + m - 1) % (m - 1), (k + i) % (m - 1));
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::vector<std::vector<LinkEstimate>> probe_links(Communicator& comm, const ProbeOptions& options) {
  const int n = comm.size();
  const int me = comm.rank();
  std::vector<LinkEstimate> row(static_cast<std::size_t>(n));
  for (const auto& round : pair_rounds(n))
    for (const auto& [a, b] : round) {
      if (me == a) row[b] = measure(comm, b, true, options);
      else if (me == b) measure(comm, a, false, options);
    }
  auto rows = comm.all_gather(std::as_bytes(std::span<const LinkEstimate>(row)));
  std::vector<std::vector<LinkEstimate>> matrix(n, std::vector<LinkEstimate>(n));
  for (int a = 0; a < n; ++a) {
    std::vector<LinkEstimate> r(n);
    std::memcpy(r.data(), rows[a].data(), std::min(rows[a].size(), r.size() * sizeof(LinkEstimate)));
    for (int b = a + 1; b < n; ++b) matrix[a][b] = matrix[b][a] = r[b];
  }
  return matrix;
}

}  // namespace diloco::comm
