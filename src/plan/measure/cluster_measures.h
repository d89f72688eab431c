// What the planner takes from a cluster file's measurements: each site's
// step series, the overlap slowdown of its leader's host, how an exchange's
// time varies, and what a small collective pays right behind an exchange.
#pragma once

#include <string>
#include <vector>

#include "plan/measure/cluster_file.h"
#include "plan/model/exchange_cost.h"

namespace diloco::plan {

// Each site's own link from pairs probed one at a time: a pair moves at its
// slower end, so a site's link is its fastest pair (the fastest site's is
// then the second fastest's, which no exchange's time depends on), and its
// latency its lowest pair's (a pair takes the larger of its two). A pair too
// fast to measure (0) makes both ends unlimited.
std::vector<SiteLink> site_links(const std::vector<std::vector<comm::LinkEstimate>>& pairs);

// The sites topology.site_by = "links" would form from the links between
// ranks, cut at the first drop by `link_gap`; where no link stands out (every
// rank its own datacenter, say), the recipe's `recipe_sites` as contiguous
// blocks of ranks, which is how it would train. Leaders: each site's first rank.
struct PlannedSites {
  std::vector<int> site_of_rank;
  std::vector<int> leaders;  // by site
  std::string explanation;   // why the links cut the sites where they did
  bool blocks = false;       // no link stood out: the recipe's sites as blocks
  bool launched = false;     // the cluster file's sites (launched apart), not cut by links
};
PlannedSites planned_sites(const std::vector<std::vector<comm::LinkEstimate>>& links, double link_gap,
                           int recipe_sites);

// The sites of a cluster file whose nodes give them (sites launched apart,
// checked by read_cluster: numbered in rank order, each a block of ranks).
PlannedSites launched_sites(const std::vector<ClusterNode>& nodes);

// What the planner takes from a cluster file: the sites its nodes give
// (sites launched apart), else those topology.site_by = "links" would form
// (or, where no link stands out, the recipe's sites as blocks of ranks);
// their leaders (first ranks), the links between those and each site's
// measures.
struct ClusterSites {
  std::vector<ClusterNode> nodes;
  PlannedSites partition;
  std::vector<bool> leader;    // by rank
  std::vector<SiteLink> sites;  // each leader's link
  double slowest_step_s = 0.0;
  std::vector<std::vector<double>> site_steps;  // see site_step_series; empty if not measured
  std::vector<int> site_shared_host;            // see shared_hosts; empty if none
  std::vector<int> site_ranks;                  // ranks per site
  std::vector<double> site_overlap_slowdown;    // per site: its leader's host's; empty if not measured
  std::vector<double> exchange_spread;          // empty if not measured
  double exchange_mean_s = 0.0;                 // see exchange_mean_seconds; 0 if not measured
  std::string probe_codec;                      // the codec of the probe's exchanges
  double control_s = 0.0;                       // see control_seconds
};
ClusterSites cluster_sites(const Cluster& cluster, double link_gap, int recipe_sites);

// Per site (site_of_rank by rank), its k-th step: the slowest of its ranks'
// k-th. Empty unless every rank has a series.
std::vector<std::vector<double>> site_step_series(const std::vector<ClusterNode>& nodes,
                                                  const std::vector<int>& site_of_rank, int sites);

// Per site, the index of the host it shares beyond the host's cores: every
// rank of the site on one host, whose ranks (of all sites) outnumber the
// cores its nodes give; -1 for a site without one. Empty when no site shares
// (or no node gives its cores).
std::vector<int> shared_hosts(const std::vector<ClusterNode>& nodes, const std::vector<int>& site_of_rank, int sites);

// Per leader rank, the mean overlap slowdown of its host's ranks. Empty
// unless every rank measured one.
std::vector<double> host_overlap_slowdown(const std::vector<ClusterNode>& nodes, const std::vector<int>& leaders);

// The probe's exchange times, each the slowest leader's, over their mean
// (the ranks that timed exchanges: the leaders). Empty when none did.
std::vector<double> exchange_spread(const std::vector<ClusterNode>& nodes);

// How long the probe's exchange took over these links with the steps
// running (s): the largest of the leaders' mean exchange times. All leaders
// start each exchange together (an all-reduce ends the one before); each
// ends when its last payload has arrived, and a round waits for its
// slowest site's. Not the mean of the k-th exchanges' largest: the largest
// of a few noisy times overstates. 0 when no rank timed exchanges.
double exchange_mean_seconds(const std::vector<ClusterNode>& nodes);

// The mean time of the small all-reduce right after each of the probe's
// exchanges, on the last rank to reach it. 0 unless every rank timed them.
double control_seconds(const std::vector<ClusterNode>& nodes);

}  // namespace diloco::plan
