// `diloco plan`: the inputs of the round model (plan_model.h) from the
// recipe, a links.json or a cluster file, and a step time measured with the
// recipe's model and batch on this machine (or given, or the cluster's);
// the what-if table, and the plan a goal picks.
#include "app/plan_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "diloco/compression/codec.h"
#include "app/cluster_file.h"
#include "app/cluster_measures.h"
#include "app/plan_memory.h"
#include "app/plan_model.h"
#include "comm/site_partition.h"
#include "comm/topology.h"
#include "app/train_command.h"
#include "inner/inner_loop.h"

namespace diloco::app {
namespace {

using PairLink = comm::LinkEstimate;

// Pair links from the links.json that `diloco probe` writes: {"sites": N,
// "links": [{"a", "b", "latency_ms", "bandwidth_mbps"}, ...]}, every pair of
// the recipe's sites once. Anything else is a RecipeError naming the file
// and the field.
std::vector<std::vector<PairLink>> links_from_json(const std::string& path, int sites) {
  const std::string where = "--links " + path;
  std::ifstream in(path);
  if (!in) throw RecipeError(where + ": cannot read");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw RecipeError(where + ": not JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("links") || !doc["links"].is_array())
    throw RecipeError(where + ": needs a \"links\" array (as diloco probe writes it)");
  return parse_link_pairs(doc["links"], sites, where, "sites");
}

std::vector<std::vector<PairLink>> links_from_recipe(const Recipe& r) {
  const int n = r.topology.sites;
  std::vector<std::vector<PairLink>> m(n, std::vector<PairLink>(n));
  auto emulator = r.links.emulator();
  if (!emulator) return m;  // no links configured: free and instant
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const double lat = emulator->transfer_seconds(a, b, 0);
      const double one_mb = emulator->transfer_seconds(a, b, 1000000) - lat;
      m[a][b] = {lat, one_mb > 0.0 ? 1e6 / one_mb : 0.0};
    }
  return m;
}


// The sites topology.site_by = "links" would form from a cluster file,
// printed with the reasons, and what the plan needs of them: the links
// between the sites' leaders (their first ranks) and the slowest rank's step
// time (a blocking round waits for it).
struct ClusterSites {
  int ranks = 0;
  std::vector<ClusterNode> nodes;
  std::vector<bool> leader;  // by rank
  std::vector<std::vector<PairLink>> leader_links;
  double slowest_step_s = 0.0;
  std::vector<std::vector<double>> site_steps;  // per site: its slowest rank's k-th step; empty if not measured
  std::vector<double> site_overlap_slowdown;    // per site: its leader's; empty if not measured
  std::vector<double> exchange_spread;          // see PlanInputs; empty if not measured
  std::string probe_codec;                      // the codec of the probe's exchanges
  double control_s = 0.0;                       // see PlanInputs
};


ClusterSites sites_from_cluster(const std::string& path, double gap, int recipe_sites) {
  const Cluster cluster = read_cluster(path);
  std::printf("cluster %s: %zu ranks\n%5s %-16s %-8s %10s %10s\n", path.c_str(), cluster.nodes.size(), "rank", "host",
              "device", "memory_GB", "step_s");
  ClusterSites out;
  out.ranks = static_cast<int>(cluster.nodes.size());
  for (const auto& node : cluster.nodes) {
    std::printf("%5d %-16s %-8s %10.2f %10.4f\n", node.rank, node.host.c_str(), node.device.c_str(),
                node.memory_bytes / 1e9, node.step_s);
    out.slowest_step_s = std::max(out.slowest_step_s, node.step_s);
  }
  auto p = comm::partition_by_links(bandwidth_matrix(cluster.links), gap);
  std::printf("sites by links (topology.link_gap = %.1f):\n%s", gap, p.explanation.c_str());
  // No link stands out (every rank its own datacenter, say): the recipe's
  // sites, as contiguous blocks of ranks, which is how it would train.
  const bool blocks = p.num_sites == 1 && recipe_sites > 1 && recipe_sites <= out.ranks;
  if (blocks) {
    const auto t = comm::Topology::split(0, out.ranks, recipe_sites);
    p.site_of_rank = t.site_of_rank;
    p.num_sites = recipe_sites;
    std::printf("one site by links; planning the recipe's topology.sites = %d as blocks of ranks instead\n",
                recipe_sites);
  }
  std::vector<int> leader(static_cast<std::size_t>(p.num_sites), -1);
  out.site_steps = site_step_series(cluster.nodes, p.site_of_rank, p.num_sites);
  out.nodes = cluster.nodes;
  out.leader.assign(cluster.nodes.size(), false);
  for (int r = 0; r < static_cast<int>(p.site_of_rank.size()); ++r)
    if (leader[p.site_of_rank[r]] < 0) {
      leader[p.site_of_rank[r]] = r;
      out.leader[static_cast<std::size_t>(r)] = true;
    }
  out.leader_links.assign(leader.size(), std::vector<PairLink>(leader.size()));
  for (std::size_t a = 0; a < leader.size(); ++a)
    for (std::size_t b = 0; b < leader.size(); ++b)
      if (a != b) out.leader_links[a][b] = cluster.links[leader[a]][leader[b]];
  out.site_overlap_slowdown = host_overlap_slowdown(cluster.nodes, leader);
  out.exchange_spread = exchange_spread(cluster.nodes);
  out.probe_codec = cluster.exchange_codec;
  out.control_s = control_seconds(cluster.nodes);
  if (blocks)
    std::printf("to train on them: topology.site_by = \"block\" (the default) with topology.sites = %d\n\n", recipe_sites);
  else
    std::printf("to train on them: --set topology.site_by=links --set topology.cluster=%s\n\n", path.c_str());
  return out;
}

const char* overlap_name(outer::OverlapMode m) {
  return m == outer::OverlapMode::kNone ? "none" : (m == outer::OverlapMode::kDelayed ? "delayed" : "streaming");
}

// The memory model's inputs for the recipe with `codec` and `overlap`.
MemoryInputs memory_inputs(const Recipe& r, double params, int sites, double runtime, const std::string& codec,
                           const std::string& overlap, int fragments) {
  MemoryInputs m;
  m.model = r.model;
  m.params = params;
  m.batch = r.data.batch_size;
  m.bf16 = r.devices.precision == inner::Precision::kBf16;
  m.cuda = r.devices.device == inner::DeviceSetting::kCuda;
  m.codec = codec;
  m.block = static_cast<std::uint32_t>(r.compression.block);
  m.topk_ratio = r.compression.topk_ratio;
  m.error_feedback = error_feedback_for(codec, r.compression.codec, r.compression.error_feedback.value_or(false));
  m.momentum = r.outer.momentum != 0.0;
  m.overlap = overlap;
  m.fragments = fragments;
  m.sites = sites;
  m.runtime_bytes = runtime;
  m.data_bytes = data_bytes_of(r.data.paths, r.data.format == inner::DataFormat::kTokens);
  return m;
}

double in_mb(double bytes) { return bytes / 1e6; }

// One rank's memory, leader and other ranks, for the recipe's settings with
// `codec` and `overlap`; with a cluster, each rank against what it reported.
void print_memory(const Recipe& r, double params, int sites, double runtime, const std::string& codec,
                  const std::string& overlap, int fragments, const ClusterSites* cluster) {
  MemoryInputs in = memory_inputs(r, params, sites, runtime, codec, overlap, fragments);
  auto show = [&](MemoryInputs m, const char* who) {
    const auto e = estimate_memory(m);
    std::printf("  %-12s %9.0f %9.0f %9.0f %9.0f %11.0f%s | %9.0f %9.0f %9.0f %9.0f %9.0f | %9.0f %9.0f\n", who,
                in_mb(e.weights), in_mb(e.grads), in_mb(e.adam), in_mb(e.autocast), in_mb(e.activations),
                e.activations_known ? " " : "?", in_mb(e.runtime), in_mb(e.data), in_mb(e.outer), in_mb(e.exchange),
                in_mb(e.allocator), in_mb(e.device()), in_mb(e.host()));
    return e;
  };
  std::printf("\nmemory per rank, MB (batch %d, %s, codec %s, overlap %s; runtime: %s;\n"
              "  allocator: what glibc keeps of freed activations on a CPU rank, 0.6x of them as measured):\n"
              "  %-12s %9s %9s %9s %9s %12s | %9s %9s %9s %9s %9s | %9s %9s\n",
              in.batch, in.bf16 ? "bf16" : "fp32", codec.c_str(), overlap.c_str(),
              cluster ? "as each rank measured it, else this process before any model" : "this process before any model",
              "rank", "weights", "grads",
              "adamw", "autocast", "activations", "runtime", "data", "outer", "exchange", "allocator", "device",
              "host");
  if (!cluster) {
    in.leader = true;
    const auto lead = show(in, "leader");
    in.leader = false;
    const auto other = show(in, "other ranks");
    if (in.cuda)
      std::printf("  model on a GPU (run.device): GPU memory %.0f MB a rank; host memory: leader %.0f MB, other ranks %.0f MB",
                  in_mb(lead.device()), in_mb(lead.host()), in_mb(other.host()));
    else
      std::printf("  model on the CPU (run.device): a rank needs device + host: leader %.0f MB, other ranks %.0f MB "
                  "(in use, without what glibc keeps: leader %.0f MB)",
                  in_mb(lead.total()), in_mb(other.total()), in_mb(lead.total() - lead.allocator));
    std::printf("%s\n", lead.activations_known ? "" : " (?: a TorchScript module's activations are not known)");
    return;
  }
  for (std::size_t rank = 0; rank < cluster->nodes.size(); ++rank) {
    const auto& node = cluster->nodes[rank];
    in.leader = cluster->leader[rank];
    in.cuda = node.device.rfind("cuda", 0) == 0;
    in.runtime_bytes = node.runtime_bytes > 0.0 ? node.runtime_bytes : runtime;
    char who[32];
    std::snprintf(who, sizeof who, "%zu%s", rank, in.leader ? " leader" : "");
    const auto e = show(in, who);
    const std::string advice = memory_advice(in, e, node.memory_bytes);
    std::printf("  %-12s %s: needs %.0f MB of %.0f MB%s%s\n", "", node.device.c_str(),
                in_mb(in.cuda ? e.device() : e.total()), in_mb(node.memory_bytes), advice.empty() ? ", fits" : " - ",
                advice.c_str());
  }
}

}  // namespace

int run_plan(const Recipe& recipe, const PlanOptions& options) {
  inner::warm_up_runtime({});
  const double runtime = resident_bytes();  // libtorch started, before any model or data
  int n = recipe.topology.sites;
  int ranks = n;  // without a cluster file: one per site
  std::vector<std::vector<PairLink>> links;
  double step_s = 0.0;
  std::size_t params = 0;
  std::optional<ClusterSites> cluster;
  try {
    std::optional<double> cluster_step;
    if (!options.cluster_file.empty()) {
      cluster = sites_from_cluster(options.cluster_file, recipe.topology.link_gap, recipe.topology.sites);
      n = static_cast<int>(cluster->leader_links.size());
      ranks = cluster->ranks;
      links = cluster->leader_links;
      cluster_step = cluster->slowest_step_s;
    } else {
      links = options.links_file.empty() ? links_from_recipe(recipe) : links_from_json(options.links_file, n);
    }
    const auto given = options.step_s ? options.step_s : cluster_step;
    const auto measured = measure_model(recipe, {}, /*time_steps=*/!given);
    params = measured.params;
    step_s = given ? *given : measured.step_s;
  } catch (const RecipeError& e) {
    std::cerr << "diloco: error: " << e.what() << std::endl;
    return 2;
  } catch (const inner::DataError& e) {
    std::cerr << "diloco: error: data: " << e.what() << std::endl;
    return 2;
  }

  PlanInputs in;
  in.links = links;
  in.params = params;
  in.step_s = step_s;
  if (cluster && !options.step_s) in.site_steps = cluster->site_steps;
  if (cluster) in.site_overlap_slowdown = cluster->site_overlap_slowdown;
  if (cluster) {
    in.exchange_spread = cluster->exchange_spread;
    in.control_s = cluster->control_s;
  }
  in.tokens_per_step = static_cast<double>(recipe.data.batch_size) * recipe.model.seq_len * ranks;
  in.block = static_cast<std::uint32_t>(recipe.compression.block);
  in.topk_ratio = recipe.compression.topk_ratio;
  in.h_min = recipe.sync.h_min;
  in.h_max = recipe.sync.h_max;
  in.fragments = std::max(2, recipe.sync.fragments);
  in.layers = std::max(1, recipe.model.n_layers);

  std::printf("plan for %s: %d sites, %zu params, inner step %.4f s (%s), %d ranks (%s), target share %.2f\n",
              recipe.run.name.c_str(), n, params, step_s,
              options.step_s ? "given" : (!options.cluster_file.empty() ? "the cluster's slowest rank" : "measured here, one rank"),
              ranks, options.cluster_file.empty() ? "one per site: no cluster file" : "the cluster's",
              recipe.sync.target_comm_share);
  if (!in.site_steps.empty()) {
    const int h = recipe.sync.H;
    std::printf("a round's compute from the sites' step series (the slowest site each round): %.4f s per step "
                "at H %d, %.4f at H %d",
                round_compute_s(in, h) / h, h, round_compute_s(in, 4 * h) / (4 * h), 4 * h);
    if (!in.site_overlap_slowdown.empty())
      std::printf("; with an exchange in flight throughout, %.4f at H %d", round_compute_s(in, h, 1.0) / h, h);
    std::printf("\n");
  }
  if (!in.exchange_spread.empty()) {
    auto sorted = in.exchange_spread;
    std::sort(sorted.begin(), sorted.end());
    const char* codec = cluster->probe_codec.c_str();
    std::printf("an exchange's time over its mean, from the probe's %zu exchanges with %s: %.2f to %.2f (middle "
                "half %.2f to %.2f); overlapped rounds wait for the longer of steps and exchange, every codec's "
                "spread as this one\n",
                sorted.size(), codec, sorted.front(), sorted.back(), sorted[sorted.size() / 4],
                sorted[3 * sorted.size() / 4]);
  }
  if (in.control_s > 0.0)
    std::printf("a small all-reduce right after an exchange (%s): %.4f s; each round's report pays it, and its stop "
                "vote where an overlapped exchange is still in flight\n", cluster->probe_codec.c_str(), in.control_s);
  std::printf("%-10s %-10s %7s %12s %12s %10s %12s %10s %10s %10s\n", "codec", "exchange", "H", "round_s", "sync_s",
              "share", "bytes/round", "util", "delayed", "streaming");
  std::vector<std::string> codecs{recipe.compression.codec};
  for (const char* c : {"none", "fp16", "int8", "int4", "topk"})
    if (std::find(codecs.begin(), codecs.end(), c) == codecs.end()) codecs.push_back(c);
  try {
    for (const auto& name : codecs) {
      const double sync = evaluate(in, name, "none", 1).sync_s;
      const double f = recipe.sync.target_comm_share;
      const int overhead_H = static_cast<int>(std::clamp(std::ceil(sync * (1.0 - f) / (f * step_s)),
                                                         static_cast<double>(recipe.sync.h_min),
                                                         static_cast<double>(recipe.sync.h_max)));
      std::vector<int> candidates{recipe.sync.H, overhead_H};
      for (int h : {10, 50, 100, 500}) candidates.push_back(h);
      std::sort(candidates.begin(), candidates.end());
      candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
      for (int h : candidates) {
        const auto c = evaluate(in, name, "none", h);
        const char* mark = h == overhead_H ? " <- overhead" : (h == recipe.sync.H ? " <- recipe" : "");
        std::printf("%-10s %-10s %7d %12.3f %12.3f %10.3f %12.0f %9.1f%% %9.1f%% %9.1f%%%s\n", name.c_str(),
                    c.ring ? "ring" : "all_gather", h, c.round_s, c.sync_s, c.sync_s / c.round_s, c.bytes_per_round,
                    100.0 * c.utilization, 100.0 * evaluate(in, name, "delayed", h).utilization,
                    100.0 * evaluate(in, name, "streaming", h).utilization, mark);
      }
    }
    std::printf("round_s = H * step + sync_s; share = sync_s / round_s; bytes/round: all site leaders together;\n"
                "util = compute share of a blocking round; delayed, streaming: the same with that overlap (streaming:\n"
                "%d fragments, each overlapping min(H/fragments, 5) steps). '<- overhead': smallest H meeting\n"
                "sync.target_comm_share.\n",
                std::min({in.fragments, in.layers}));
    print_memory(recipe, static_cast<double>(params), n, runtime, recipe.compression.codec,
                 overlap_name(recipe.sync.overlap), recipe.sync.overlap == outer::OverlapMode::kStreaming
                     ? std::max(1, recipe.sync.fragments) : 1, cluster ? &*cluster : nullptr);
    if (options.goal.empty()) return 0;
    const PlanGoal goal = parse_goal(options.goal);
    PlanCandidate best;
    std::string rule;
    std::vector<std::string> preferred;  // the codecs that keep more first; top-k only when the recipe names it
    for (const char* c : {"none", "fp16", "int8", "int4"}) preferred.push_back(c);
    if (std::find(preferred.begin(), preferred.end(), recipe.compression.codec) == preferred.end())
      preferred.push_back(recipe.compression.codec);
    if (!recommend(in, preferred, goal, 1.0 - recipe.sync.target_comm_share, recipe.sync.H, best, rule)) {
      std::printf("\nrecommended (goal %s): none: no codec and overlap reaches it with H in [%d, %d]\n",
                  options.goal.c_str(), in.h_min, in.h_max);
      return 0;
    }
    std::printf("\nrecommended (goal %s; %s):\n  %s, overlap %s, H %d: round %.3f s, exposed communication %.3f s, "
                "utilization %.1f%%, %.0f bytes per round, %.3g bytes per 1B tokens\n",
                options.goal.c_str(), rule.c_str(), best.codec.c_str(), best.overlap.c_str(), best.H, best.round_s,
                best.exposed_s, 100.0 * best.utilization, best.bytes_per_round, best.bytes_per_billion_tokens);
    std::printf("as flags:\n  %s\nas a recipe fragment:\n%s", as_sets(best).c_str(), as_toml(best).c_str());
    if (best.codec != recipe.compression.codec || best.overlap != overlap_name(recipe.sync.overlap))
      print_memory(recipe, static_cast<double>(params), n, runtime, best.codec, best.overlap, best.fragments,
                   cluster ? &*cluster : nullptr);
  } catch (const RecipeError& e) {
    std::cerr << "diloco: error: " << e.what() << std::endl;
    return 2;
  }
  return 0;
}

}  // namespace diloco::app
