// What the planner takes from a cluster file's measurements: each site's
// step series, the overlap slowdown of its leader's host, how an exchange's
// time varies, and what a small collective pays right behind an exchange.
#pragma once

#include <vector>

#include "app/cluster_file.h"

namespace diloco::app {

// Per site (site_of_rank by rank), its k-th step: the slowest of its ranks'
// k-th. Empty unless every rank has a series.
std::vector<std::vector<double>> site_step_series(const std::vector<ClusterNode>& nodes,
                                                  const std::vector<int>& site_of_rank, int sites);

// Per leader rank, the mean overlap slowdown of its host's ranks. Empty
// unless every rank measured one.
std::vector<double> host_overlap_slowdown(const std::vector<ClusterNode>& nodes, const std::vector<int>& leaders);

// The probe's exchange times, each the slowest rank's, over their mean.
// Empty unless every rank timed exchanges.
std::vector<double> exchange_spread(const std::vector<ClusterNode>& nodes);

// The mean time of the small all-reduce right after each of the probe's
// exchanges, on the last rank to reach it. 0 unless every rank timed them.
double control_seconds(const std::vector<ClusterNode>& nodes);

}  // namespace diloco::app
