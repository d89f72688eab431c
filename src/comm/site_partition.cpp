// Cutting a measured link graph into sites at its largest bandwidth drop.
#include "comm/site_partition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace diloco::comm {
namespace {

constexpr double kUnmeasurable = std::numeric_limits<double>::infinity();

double effective(double bytes_per_s) { return bytes_per_s == 0.0 ? kUnmeasurable : bytes_per_s; }

std::string mbps(double bytes_per_s) {
  if (std::isinf(bytes_per_s)) return "unmeasurably fast";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f Mbit/s", bytes_per_s * 8.0 / 1e6);
  return buf;
}

int find(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

SitePartition partition_by_links(const std::vector<std::vector<double>>& bandwidth, double gap) {
  const int n = static_cast<int>(bandwidth.size());
  if (!(gap >= 1.0)) throw std::invalid_argument("the bandwidth gap must be at least 1");
  for (const auto& row : bandwidth)
    if (static_cast<int>(row.size()) != n) throw std::invalid_argument("the bandwidth matrix is not square");
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b && (!std::isfinite(bandwidth[a][b]) || bandwidth[a][b] < 0.0))
        throw std::invalid_argument("bandwidth between ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                    " must be a number >= 0");
  std::vector<double> speeds;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) speeds.push_back(effective(bandwidth[a][b]));
  std::sort(speeds.begin(), speeds.end(), std::greater<>());

  SitePartition p;
  std::size_t cut = speeds.size();  // index of the first slow speed
  for (std::size_t i = 0; i + 1 < speeds.size(); ++i) {
    if (std::isinf(speeds[i + 1])) continue;
    const double ratio = speeds[i] / speeds[i + 1];
    if (ratio >= gap) {  // the first drop as large as the gap, from the fastest down
      p.drop = ratio;
      cut = i + 1;
      break;
    }
    p.drop = std::max(p.drop, ratio);
  }
  const bool split = cut < speeds.size();
  p.threshold_bytes_per_s = split ? speeds[cut - 1] : 0.0;

  std::vector<int> parent(static_cast<std::size_t>(n));
  std::iota(parent.begin(), parent.end(), 0);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (!split || effective(bandwidth[a][b]) >= p.threshold_bytes_per_s) parent[find(parent, a)] = find(parent, b);
  std::vector<int> site_of_root(static_cast<std::size_t>(n), -1);
  p.num_sites = 0;
  for (int r = 0; r < n; ++r) {
    int& s = site_of_root[static_cast<std::size_t>(find(parent, r))];
    if (s < 0) s = p.num_sites++;
    p.site_of_rank.push_back(s);
  }
  if (n == 0) p.num_sites = 0;

  char line[256];
  if (split) {
    std::snprintf(line, sizeof line,
                  "first drop by at least %.1fx between measured bandwidths, fastest first: %.1fx, from %s to %s\n", gap,
                  p.drop, mbps(speeds[cut - 1]).c_str(), mbps(speeds[cut]).c_str());
  } else {
    std::snprintf(line, sizeof line,
                  "no drop by %.1fx between measured bandwidths (largest %.1fx): no link stands out, one site\n",
                  gap, p.drop);
  }
  p.explanation = line;
  for (int s = 0; s < p.num_sites; ++s) {
    std::string ranks;
    double slowest_in = kUnmeasurable, fastest_out = 0.0;
    bool all_fast = true;
    for (int a = 0; a < n; ++a) {
      if (p.site_of_rank[a] != s) continue;
      ranks += (ranks.empty() ? "" : ",") + std::to_string(a);
      for (int b = 0; b < n; ++b) {
        if (b == a) continue;
        const double v = effective(bandwidth[a][b]);
        if (p.site_of_rank[b] == s) {
          slowest_in = std::min(slowest_in, v);
          all_fast = all_fast && (!split || v >= p.threshold_bytes_per_s);
        } else {
          fastest_out = std::max(fastest_out, v);
        }
      }
    }
    p.explanation += "site " + std::to_string(s) + ": ranks " + ranks + "; slowest link inside " +
                     (ranks.find(',') == std::string::npos ? std::string("none") : mbps(slowest_in)) +
                     ", fastest link out " + (fastest_out > 0.0 ? mbps(fastest_out) : std::string("none")) +
                     (all_fast ? "" : "; some of its ranks are joined only through others") + "\n";
  }
  return p;
}

}  // namespace diloco::comm
