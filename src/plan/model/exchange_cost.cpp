// The exchange-cost model (see exchange_cost.h).
#include "plan/model/exchange_cost.h"

#include <algorithm>
#include <numeric>

namespace diloco::plan {
namespace {

double over(double bytes, double rate) { return rate > 0.0 ? bytes / rate : 0.0; }

// The slowest of two rates, 0 (unlimited) only when both are.
double slower(double a, double b) {
  if (a <= 0.0) return b;
  if (b <= 0.0) return a;
  return std::min(a, b);
}

// One message of `bytes` from one site to another: the larger latency of
// the two, then the bytes at the slower of the sender's uplink and the
// receiver's downlink.
double message_seconds(const SiteLink& from, const SiteLink& to, double bytes) {
  return std::max(from.latency_s, to.latency_s) + over(bytes, slower(from.up_bytes_per_s, to.down_bytes_per_s));
}

// The values in one all-gather part, as the exchange cuts them: at most
// about part_bytes of payload, whole codec blocks; codecs that cannot be cut
// (top-k) go whole.
std::size_t part_values(const ExchangeShape& s) {
  const std::size_t granule = s.codec->split_granule();
  const std::size_t whole = s.codec->payload_size(s.values);
  if (granule == 0 || whole <= s.part_bytes || s.values == 0) return s.values;
  const double per_byte = static_cast<double>(s.values) / static_cast<double>(whole);
  const auto values = static_cast<std::size_t>(per_byte * static_cast<double>(s.part_bytes));
  return std::max(granule, values / granule * granule);
}

}  // namespace

Algorithm choose_algorithm(AlgorithmSetting setting, int sites, bool keyed, std::size_t whole_payload,
                           std::size_t chunk_payload) {
  if (setting == AlgorithmSetting::kRing) return Algorithm::kRing;
  if (setting == AlgorithmSetting::kAllGather || keyed || sites < 3) return Algorithm::kAllGather;
  const auto n = static_cast<std::size_t>(sites);
  return 2 * (n - 1) * chunk_payload < (n - 1) * whole_payload ? Algorithm::kRing : Algorithm::kAllGather;
}

double all_gather_seconds(const std::vector<SiteLink>& links, const std::vector<double>& payload) {
  const std::size_t n = links.size();
  if (n < 2) return 0.0;
  const double total = std::accumulate(payload.begin(), payload.end(), 0.0);
  double busiest = 0.0, latency = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double up = over(static_cast<double>(n - 1) * payload[i], links[i].up_bytes_per_s);
    const double down = over(total - payload[i], links[i].down_bytes_per_s);
    busiest = std::max({busiest, up, down});
    latency = std::max(latency, links[i].latency_s);
  }
  // A pair takes the larger latency of its two sites; every pair is in play.
  return latency + busiest;
}

double shifted_gather_seconds(const std::vector<SiteLink>& links, const std::vector<double>& payload) {
  const std::size_t n = links.size();
  const auto transfer = [&](std::size_t from, std::size_t to) { return message_seconds(links[from], links[to], payload[from]); };
  std::vector<double> done(n, 0.0), next(n, 0.0);  // when each site finished the shift before
  for (std::size_t j = 1; j < n; ++j) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t to = (i + j) % n, from = (i + n - j) % n;
      next[i] = std::max(std::max(done[i], done[to]) + transfer(i, to), std::max(done[from], done[i]) + transfer(from, i));
    }
    done.swap(next);
  }
  return n < 2 ? 0.0 : *std::max_element(done.begin(), done.end());
}

double ring_hop_seconds(const std::vector<SiteLink>& links, double bytes) {
  const std::size_t n = links.size();
  double slowest = 0.0;
  for (std::size_t i = 0; n > 1 && i < n; ++i) slowest = std::max(slowest, message_seconds(links[i], links[(i + 1) % n], bytes));
  return slowest;
}

ExchangeCost exchange_cost(const std::vector<SiteLink>& links, const ExchangeShape& shape) {
  ExchangeCost c;
  const int n = static_cast<int>(links.size());
  c.sent.assign(links.size(), 0.0);
  if (n < 2) return c;
  const double mac = shape.keyed ? kMacBytes : 0.0;
  const std::size_t whole = shape.codec->payload_size(shape.values);
  const std::size_t chunk = shape.codec->payload_size((shape.values + n - 1) / n);
  c.algorithm = choose_algorithm(shape.setting, n, shape.keyed, whole, chunk);
  const auto each = [&](double bytes) { return std::vector<double>(links.size(), bytes); };
  c.report_seconds = all_gather_seconds(links, each(kReportBytes + mac));
  double per_site = (n - 1) * (kReportBytes + mac);
  double payload_s = 0.0;
  if (c.algorithm == Algorithm::kRing) {
    const double hop = static_cast<double>(chunk);
    payload_s = (n - 1) * ring_hop_seconds(links, hop) + shifted_gather_seconds(links, each(hop));
    per_site += 2.0 * (n - 1) * hop;
  } else {
    const std::size_t part = part_values(shape);
    c.parts = part == 0 ? 1 : static_cast<int>((shape.values + part - 1) / part);
    for (int p = 0; p < c.parts; ++p) {
      const std::size_t first = static_cast<std::size_t>(p) * part;
      const std::size_t values = std::min(part, shape.values - first);
      const double bytes = static_cast<double>(shape.codec->payload_size(values)) + mac;
      payload_s += shifted_gather_seconds(links, each(bytes));
      per_site += (n - 1) * bytes;
    }
  }
  c.seconds = c.report_seconds + payload_s;
  c.sent = each(per_site);
  c.bytes = per_site * n;
  return c;
}

}  // namespace diloco::plan
