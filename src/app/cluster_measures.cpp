// What the planner takes from a cluster file's measurements (see
// cluster_measures.h).
#include "app/cluster_measures.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

namespace diloco::app {

// A site steps as fast as its slowest rank (its ranks all-reduce every
// step): the k-th step of each site is the largest of its ranks' k-th.
std::vector<std::vector<double>> site_step_series(const std::vector<ClusterNode>& nodes,
                                                  const std::vector<int>& site_of_rank, int sites) {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(sites));
  for (const auto& node : nodes) {
    const auto& steps = node.steps;
    if (steps.empty()) return {};
    auto& site = out[static_cast<std::size_t>(site_of_rank[static_cast<std::size_t>(node.rank)])];
    if (site.empty()) {
      site = steps;
      continue;
    }
    site.resize(std::min(site.size(), steps.size()));
    for (std::size_t k = 0; k < site.size(); ++k) site[k] = std::max(site[k], steps[k]);
  }
  return out;
}

// What an exchange in flight costs each site's leader: the mean of the
// slowdowns measured on its host's ranks. Ranks that share a host share its
// cores: the comm threads' work lands on whichever steps the kernel puts it
// beside, which changes from second to second (one rank's own figure
// ranged 0.86 to 1.75 over probes of the same cluster, the host's mean 1.11
// to 1.19). Empty unless every rank measured one.
std::vector<double> host_overlap_slowdown(const std::vector<ClusterNode>& nodes, const std::vector<int>& leaders) {
  std::map<std::string, std::pair<double, int>> host;  // sum, ranks
  for (const auto& n : nodes) {
    if (n.overlap_slowdown <= 0.0) return {};
    auto& h = host[n.host];
    h.first += n.overlap_slowdown;
    ++h.second;
  }
  std::vector<double> out;
  for (int l : leaders) {
    const auto& h = host[nodes[static_cast<std::size_t>(l)].host];
    out.push_back(h.first / h.second);
  }
  return out;
}

// How an exchange's time varies: the probe's k-th exchange ran on every
// rank at once, and lasted as long as it did on the last rank to finish it;
// those times over their mean. Empty unless every rank timed exchanges.
std::vector<double> exchange_spread(const std::vector<ClusterNode>& nodes) {
  std::vector<double> slowest;
  for (const auto& n : nodes) {
    if (n.exchanges.empty()) return {};
    if (slowest.empty()) slowest = n.exchanges;
    slowest.resize(std::min(slowest.size(), n.exchanges.size()));
    for (std::size_t k = 0; k < slowest.size(); ++k) slowest[k] = std::max(slowest[k], n.exchanges[k]);
  }
  const double mean = std::accumulate(slowest.begin(), slowest.end(), 0.0) / static_cast<double>(slowest.size());
  for (auto& t : slowest) t /= mean;
  return slowest;
}

// A small collective right behind an exchange: the k-th all-reduce after
// the probe's k-th exchange lasted, on the last rank to reach it (the one
// that waited for no other rank), its messages' time behind the exchange's
// tail; the mean over k. 0 unless every rank timed them.
double control_seconds(const std::vector<ClusterNode>& nodes) {
  std::vector<double> last;
  for (const auto& n : nodes) {
    if (n.controls.empty()) return 0.0;
    if (last.empty()) last = n.controls;
    last.resize(std::min(last.size(), n.controls.size()));
    for (std::size_t k = 0; k < last.size(); ++k) last[k] = std::min(last[k], n.controls[k]);
  }
  return std::accumulate(last.begin(), last.end(), 0.0) / static_cast<double>(last.size());
}

}  // namespace diloco::app
