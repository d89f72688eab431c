// What the planner takes from a cluster file's measurements (see
// cluster_measures.h).
#include "plan/measure/cluster_measures.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "comm/site_partition.h"
#include "comm/topology.h"

namespace diloco::plan {

std::vector<SiteLink> site_links(const std::vector<std::vector<comm::LinkEstimate>>& pairs) {
  std::vector<SiteLink> sites(pairs.size());
  for (std::size_t a = 0; a < pairs.size(); ++a) {
    bool unlimited = false, first = true;
    for (std::size_t b = 0; b < pairs.size(); ++b) {
      if (a == b) continue;
      const auto& e = pairs[a][b];
      unlimited |= e.bandwidth_bytes_per_s <= 0.0;
      sites[a].up_bytes_per_s = std::max(sites[a].up_bytes_per_s, e.bandwidth_bytes_per_s);
      sites[a].latency_s = first ? e.latency_s : std::min(sites[a].latency_s, e.latency_s);
      first = false;
    }
    if (unlimited) sites[a].up_bytes_per_s = 0.0;
    sites[a].down_bytes_per_s = sites[a].up_bytes_per_s;
  }
  return sites;
}

PlannedSites planned_sites(const std::vector<std::vector<comm::LinkEstimate>>& links, double link_gap,
                           int recipe_sites) {
  const int ranks = static_cast<int>(links.size());
  auto p = comm::partition_by_links(bandwidth_matrix(links), link_gap);
  PlannedSites out;
  out.explanation = p.explanation;
  out.blocks = p.num_sites == 1 && recipe_sites > 1 && recipe_sites <= ranks;
  if (out.blocks) {
    p.site_of_rank = comm::Topology::split(0, ranks, recipe_sites).site_of_rank;
    p.num_sites = recipe_sites;
  }
  out.site_of_rank = p.site_of_rank;
  out.leaders.assign(static_cast<std::size_t>(p.num_sites), -1);
  for (int r = 0; r < ranks; ++r)
    if (out.leaders[p.site_of_rank[r]] < 0) out.leaders[p.site_of_rank[r]] = r;
  return out;
}

PlannedSites launched_sites(const std::vector<ClusterNode>& nodes) {
  PlannedSites out;
  out.explanation = "each launch one site, as the cluster file gives them\n";
  for (const auto& n : nodes) {
    out.site_of_rank.push_back(n.site);
    const bool first = static_cast<int>(out.leaders.size()) == n.site;
    if (first) out.leaders.push_back(n.rank);
    out.explanation += (first ? std::string(n.rank == 0 ? "" : "\n") + "site " + std::to_string(n.site) + ": ranks "
                              : std::string(",")) + std::to_string(n.rank);
  }
  out.explanation += "\n";
  out.launched = true;
  return out;
}

ClusterSites cluster_sites(const Cluster& cluster, double link_gap, int recipe_sites) {
  ClusterSites out;
  out.nodes = cluster.nodes;
  for (const auto& node : cluster.nodes) out.slowest_step_s = std::max(out.slowest_step_s, node.step_s);
  const bool launched_apart = !cluster.nodes.empty() && cluster.nodes.front().site >= 0;
  out.partition = launched_apart ? launched_sites(cluster.nodes) : planned_sites(cluster.links, link_gap, recipe_sites);
  const auto& leaders = out.partition.leaders;
  out.leader.assign(cluster.nodes.size(), false);
  for (int l : leaders) out.leader[static_cast<std::size_t>(l)] = true;
  std::vector<std::vector<comm::LinkEstimate>> between(leaders.size(), std::vector<comm::LinkEstimate>(leaders.size()));
  for (std::size_t a = 0; a < leaders.size(); ++a)
    for (std::size_t b = 0; b < leaders.size(); ++b)
      if (a != b) between[a][b] = cluster.links[leaders[a]][leaders[b]];
  out.sites = site_links(between);
  out.site_steps = site_step_series(cluster.nodes, out.partition.site_of_rank, static_cast<int>(leaders.size()));
  out.site_shared_host = shared_hosts(cluster.nodes, out.partition.site_of_rank, static_cast<int>(leaders.size()));
  out.site_ranks.assign(leaders.size(), 0);
  for (int site : out.partition.site_of_rank) ++out.site_ranks[static_cast<std::size_t>(site)];
  out.site_overlap_slowdown = host_overlap_slowdown(cluster.nodes, leaders);
  out.exchange_spread = exchange_spread(cluster.nodes);
  out.exchange_mean_s = exchange_mean_seconds(cluster.nodes);
  out.probe_codec = cluster.exchange_codec;
  out.control_s = control_seconds(cluster.nodes);
  return out;
}

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

std::vector<int> shared_hosts(const std::vector<ClusterNode>& nodes, const std::vector<int>& site_of_rank, int sites) {
  std::map<std::string, std::pair<int, int>> host;  // ranks, the fewest cores a node gives (0: unknown)
  for (const auto& n : nodes) {
    auto& h = host[n.host];
    ++h.first;
    h.second = n.cores <= 0 || h.second < 0 ? -1 : (h.second == 0 ? n.cores : std::min(h.second, n.cores));
  }
  std::map<std::string, int> index;
  for (const auto& [name, h] : host)
    if (h.second > 0 && h.first > h.second) index.emplace(name, static_cast<int>(index.size()));
  std::vector<int> out(static_cast<std::size_t>(sites), -2);  // -2: no rank seen yet
  for (const auto& n : nodes) {
    auto& site = out[static_cast<std::size_t>(site_of_rank[static_cast<std::size_t>(n.rank)])];
    const auto it = index.find(n.host);
    const int mine = it == index.end() ? -1 : it->second;
    site = site == -2 || site == mine ? mine : -1;  // a site over two hosts shares none whole
  }
  const bool any = std::any_of(out.begin(), out.end(), [](int h) { return h >= 0; });
  return any ? out : std::vector<int>{};
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
// leader at once, and lasted as long as it did on the last one to finish it;
// those times over their mean. Empty when no rank timed exchanges.
namespace {

// The k-th exchange's time on its slowest leader, for every k all leaders timed.
std::vector<double> slowest_exchanges(const std::vector<ClusterNode>& nodes) {
  std::vector<double> slowest;
  for (const auto& n : nodes) {
    if (n.exchanges.empty()) continue;  // not a leader: it ran no exchange
    if (slowest.empty()) slowest = n.exchanges;
    slowest.resize(std::min(slowest.size(), n.exchanges.size()));
    for (std::size_t k = 0; k < slowest.size(); ++k) slowest[k] = std::max(slowest[k], n.exchanges[k]);
  }
  return slowest;
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

std::vector<double> exchange_spread(const std::vector<ClusterNode>& nodes) {
  std::vector<double> slowest = slowest_exchanges(nodes);
  const double mean = mean_of(slowest);
  for (auto& t : slowest) t /= mean;
  return slowest;
}

double exchange_mean_seconds(const std::vector<ClusterNode>& nodes) {
  double longest = 0.0;
  for (const auto& n : nodes) longest = std::max(longest, mean_of(n.exchanges));
  return longest;
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

}  // namespace diloco::plan
