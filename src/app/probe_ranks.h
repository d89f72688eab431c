// What `diloco probe --all-ranks` measures on each rank, gathered over every
// rank of a comm::LaunchGroup (one launch, or sites launched apart), and
// the cluster file it writes.
#pragma once

#include <string>
#include <vector>

#include "app/recipe.h"
#include "comm/communicator.h"
#include "comm/launch_group.h"
#include "inner/inner_loop.h"
#include "plan/measure/cluster_file.h"

namespace diloco::app {

// This rank's host (`hosts` by group rank), device and memory, with MPI and
// libtorch up and no model yet. Sets `device`.
plan::ClusterNode describe_rank(const Recipe& recipe, const std::vector<std::string>& hosts, int rank,
                                inner::DeviceConfig& device);

// Every rank times the recipe's step at once, then again with the site
// leaders' exchanges (over `leaders`, nullptr on the other ranks) in bursts,
// into `mine`. Returns false when any rank failed (this one's error printed).
bool time_steps(const Recipe& recipe, comm::LaunchGroup& group, comm::Communicator* leaders,
                const inner::DeviceConfig& device, plan::ClusterNode& mine);

// Every rank's node, gathered on every rank.
std::vector<plan::ClusterNode> gather_nodes(comm::LaunchGroup& group, const std::vector<std::string>& hosts,
                                            const plan::ClusterNode& mine);

// Prints the cluster and writes OUT/cluster.json.
void write_cluster(const Recipe& recipe, const plan::Cluster& cluster);

// Writes `text` to `path` through a file of its own and a rename, so
// launches that share a folder never interleave their writes.
void write_whole_file(const std::string& path, const std::string& text);

}  // namespace diloco::app
