// The cluster file `diloco probe --all-ranks` writes and `plan --cluster` and
// topology.site_by = "links" read: every rank (host, device, memory, step
// time) and every pair of ranks' link, as JSON.
//   {"nodes": [{"rank", "host", "device", "memory_bytes", "step_s"}, ...],
//    "links": [{"a", "b", "latency_ms", "bandwidth_mbps"}, ...]}
// A node may also give "cores": the cores it may run on (ranks on one host
// beyond its cores take turns on them), and "runtime_bytes": the rank's resident memory before
// any model (libtorch, MPI, the process), which the planner adds, and
// "steps": the durations (s) of the steps its step_s averages, in order,
// timed while every rank stepped at once (the planner takes from them how
// much longer a round's slowest site runs than the mean step says), and
// "overlap_slowdown": how much longer a step takes while exchanges run on
// every rank's comm thread (delayed and streaming overlap pay it), and
// "exchanges": how long each of those exchanges took on this rank (s), in
// order (the planner takes from them how much an exchange's time varies),
// and "controls": how long a small all-reduce of all ranks right after each
// took (what a round's stop vote and report pay behind an exchange), with
// the file's "exchange_codec" naming the codec they ran with. When the sites
// were launched apart (topology.join = "rendezvous"), every node gives
// "site": the launch it ran in; ranks are then numbered site after site,
// and a pair of ranks in two sites other than their leaders (each site's
// first rank) carries the leaders' link, the only one sites launched apart
// use between them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/link_probe.h"

namespace diloco::plan {

struct ClusterNode {
  int rank = 0;
  std::string host;
  std::string device;        // "cpu" or "cuda:N"
  double memory_bytes = 0;   // what this rank may use: host memory, or the GPU's
  double step_s = 0;         // the recipe's inner step, measured on this rank
  double runtime_bytes = 0;  // resident before any model; 0: not given
  std::vector<double> steps; // each timed step, in order; empty: not given
  double overlap_slowdown = 0;  // a step with an exchange in flight over one without; 0: not given
  std::vector<double> exchanges;  // the probe's exchanges' durations (s), in order; empty: not given
  std::vector<double> controls;   // the small all-reduce after each (s); empty: not given
  int site = -1;                  // the site it was launched as (sites launched apart); -1: not given
  int cores = 0;                  // the cores the rank may run on (its affinity); 0: not given
};

struct Cluster {
  std::vector<ClusterNode> nodes;                     // indexed by rank
  std::string exchange_codec;                         // of the nodes' exchanges; "" when none timed
  std::vector<std::vector<comm::LinkEstimate>> links; // symmetric, by rank
};

// Pair links in the form links.json and the cluster file share: every pair of
// `count` members (`members`: "sites" or "ranks") exactly once, numbers >= 0.
// `where` names the file for errors. Throws InputError naming the file and
// the field.
std::vector<std::vector<comm::LinkEstimate>> parse_link_pairs(const nlohmann::json& links, int count,
                                                              const std::string& where, const char* members);

// Reads and checks a cluster file: not JSON, a missing or mistyped field, a
// rank given twice or missing, a negative or non-finite number, a pair given
// twice or missing, "site" on some nodes only or not numbering the sites
// 0, 1, ... in rank order: InputError naming the file and the field.
Cluster read_cluster(const std::string& path);

nlohmann::ordered_json cluster_json(const Cluster& cluster);

// Every pair (a < b) once, as links.json and the cluster file hold them.
nlohmann::ordered_json pairs_json(const std::vector<std::vector<comm::LinkEstimate>>& links);

// Bandwidth in bytes/s between every pair of ranks (0: too fast to measure).
std::vector<std::vector<double>> bandwidth_matrix(const std::vector<std::vector<comm::LinkEstimate>>& links);

}  // namespace diloco::plan
