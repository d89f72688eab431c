// `diloco plan`: the planner's inputs from the recipe, a links.json or a
// cluster file, and a step time measured with the recipe's model and batch
// on this machine (or given, or the cluster's); then the what-if table, each
// rank's memory, and the plan a goal picks (src/plan does the predicting).
#include "app/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/recipe_steps.h"
#include "app/train_command.h"
#include "app/train_support.h"
#include "inner/inner_loop.h"
#include "plan/choose/goal_search.h"
#include "plan/choose/what_if.h"
#include "plan/input_error.h"
#include "plan/measure/cluster_measures.h"
#include "plan/model/memory_model.h"

namespace diloco::app {
namespace {

using plan::ClusterSites;
using plan::PlanInputs;

// Each site's link from the links.json `diloco probe` writes: {"sites": N,
// "links": [{"a", "b", "latency_ms", "bandwidth_mbps"}, ...]}, every pair of
// the recipe's sites once; anything else names the file and the field.
std::vector<plan::SiteLink> links_from_json(const std::string& path, int sites) {
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
  return plan::site_links(plan::parse_link_pairs(doc["links"], sites, where, "sites"));
}

// Each site's link as [links] sets it for the first round (none configured:
// free and instant): its bandwidth each way, as the emulator shapes it.
std::vector<plan::SiteLink> links_from_recipe(const Recipe& r) {
  std::vector<plan::SiteLink> sites(static_cast<std::size_t>(r.topology.sites));
  const auto emulator = r.links.emulator();
  for (int s = 0; emulator && s < r.topology.sites; ++s) {
    const auto link = emulator->link(s);
    const double rate = link.bandwidth_mbps * 1e6 / 8.0;
    sites[static_cast<std::size_t>(s)] = {link.latency_ms / 1000.0, rate, rate};
  }
  return sites;
}

ClusterSites read_cluster_sites(const std::string& path, double gap, int recipe_sites) {
  const auto cluster = plan::read_cluster(path);
  std::printf("cluster %s: %zu ranks\n%5s %-16s %-8s %10s %10s\n", path.c_str(), cluster.nodes.size(), "rank", "host",
              "device", "memory_GB", "step_s");
  for (const auto& node : cluster.nodes)
    std::printf("%5d %-16s %-8s %10.2f %10.4f\n", node.rank, node.host.c_str(), node.device.c_str(),
                node.memory_bytes / 1e9, node.step_s);
  auto sites = plan::cluster_sites(cluster, gap, recipe_sites);
  if (sites.partition.launched) {
    std::printf("sites launched apart: %s", sites.partition.explanation.c_str());
    std::printf("to train on them: launch each site as it was probed (topology.join = \"rendezvous\")\n\n");
    return sites;
  }
  std::printf("sites by links (topology.link_gap = %.1f):\n%s", gap, sites.partition.explanation.c_str());
  if (sites.partition.blocks) {
    std::printf("one site by links; planning the recipe's topology.sites = %d as blocks of ranks instead\n",
                recipe_sites);
    std::printf("to train on them: topology.site_by = \"block\" (the default) with topology.sites = %d\n\n",
                recipe_sites);
  } else {
    std::printf("to train on them: --set topology.site_by=links --set topology.cluster=%s\n\n", path.c_str());
  }
  return sites;
}

const char* overlap_name(outer::OverlapMode m) {
  return m == outer::OverlapMode::kNone ? "none" : (m == outer::OverlapMode::kDelayed ? "delayed" : "streaming");
}

plan::AlgorithmSetting exchange_setting(const std::string& exchange) {
  if (exchange == "ring") return plan::AlgorithmSetting::kRing;
  return exchange == "all_gather" ? plan::AlgorithmSetting::kAllGather : plan::AlgorithmSetting::kAuto;
}

// What the plan is made of: its inputs, the ranks, the runtime measured here
// and, with --cluster, the cluster's sites.
struct Planning {
  PlanInputs in;
  int ranks = 0;
  double runtime = 0.0;  // this process's resident bytes with libtorch started, before any model
  std::optional<ClusterSites> cluster;
};

Planning gather(const Recipe& recipe, const PlanOptions& options) {
  Planning p;
  inner::warm_up_runtime({});
  p.runtime = plan::resident_bytes();
  PlanInputs& in = p.in;
  p.ranks = recipe.topology.sites;  // without a cluster file: one per site
  std::optional<double> step = options.step_s;
  if (!options.cluster_file.empty()) {
    p.cluster = read_cluster_sites(options.cluster_file, recipe.topology.link_gap, recipe.topology.sites);
    p.ranks = static_cast<int>(p.cluster->nodes.size());
    in.sites = p.cluster->sites;
    if (!step) {
      step = p.cluster->slowest_step_s;
      in.site_steps = p.cluster->site_steps;
    }
    in.site_shared_host = p.cluster->site_shared_host;
    in.site_ranks = p.cluster->site_ranks;
    in.site_overlap_slowdown = p.cluster->site_overlap_slowdown;
    in.exchange_spread = p.cluster->exchange_spread;
    in.control_s = p.cluster->control_s;
    in.probe_exchange_s = p.cluster->exchange_mean_s;
    in.probe_codec = p.cluster->probe_codec;
  } else {
    in.sites = options.links_file.empty() ? links_from_recipe(recipe)
                                          : links_from_json(options.links_file, recipe.topology.sites);
  }
  const auto measured = measure_recipe(recipe, {}, /*time_steps=*/!step);
  in.params = measured.params;
  in.step_s = step ? *step : measured.step_s;
  in.exchange = exchange_setting(recipe.compression.exchange);
  in.keyed = !recipe.security.key_file.empty();
  in.tokens_per_step = static_cast<double>(recipe.data.batch_size) * recipe.model.seq_len * p.ranks;
  in.codec_settings = codec_config(recipe.compression);
  in.h_min = recipe.sync.h_min;
  in.h_max = recipe.sync.h_max;
  in.fragments = std::max(2, recipe.sync.fragments);
  in.layers = std::max(1, recipe.model.n_layers);
  return p;
}

void print_inputs(const Recipe& recipe, const PlanOptions& options, const Planning& p) {
  const PlanInputs& in = p.in;
  std::printf("plan for %s: %zu sites, %zu params, inner step %.4f s (%s), %d ranks (%s), target share %.2f\n",
              recipe.run.name.c_str(), in.sites.size(), in.params, in.step_s,
              options.step_s ? "given" : (p.cluster ? "the cluster's slowest rank" : "measured here, one rank"),
              p.ranks, p.cluster ? "the cluster's" : "one per site: no cluster file", recipe.sync.target_comm_share);
  std::printf("exchange: compression.exchange = \"%s\"%s; each site's link (latency ms, Mbit/s each way):",
              recipe.compression.exchange.c_str(), in.keyed ? ", every message with the key's 32-byte tag" : "");
  for (const auto& s : in.sites) std::printf(" %.2f/%.1f", s.latency_s * 1e3, s.up_bytes_per_s * 8e-6);
  std::printf("\n");
  if (!in.site_steps.empty()) {
    const int h = recipe.sync.H;
    const auto& hosts = in.site_shared_host;
    const bool shared = std::any_of(hosts.begin(), hosts.end(), [](int x) { return x >= 0; });
    std::printf("a round's compute from the sites' step series (the slowest site each round%s): %.4f s per step "
                "at H %d, %.4f at H %d",
                shared ? "; sites on a host with fewer cores than ranks at the host's rate" : "",
                plan::round_compute_s(in, h) / h, h, plan::round_compute_s(in, 4 * h) / (4 * h), 4 * h);
    if (!in.site_overlap_slowdown.empty())
      std::printf("; with an exchange in flight throughout, %.4f at H %d", plan::round_compute_s(in, h, 1.0) / h, h);
    std::printf("\n");
  }
  if (!in.exchange_spread.empty()) {
    auto sorted = in.exchange_spread;
    std::sort(sorted.begin(), sorted.end());
    std::printf("an exchange's time over its mean, from the probe's %zu exchanges with %s: %.2f to %.2f (middle "
                "half %.2f to %.2f); overlapped rounds wait for the longer of steps and exchange, every codec's "
                "spread as this one\n",
                sorted.size(), p.cluster->probe_codec.c_str(), sorted.front(), sorted.back(),
                sorted[sorted.size() / 4], sorted[3 * sorted.size() / 4]);
  }
  if (const auto m = plan::measured_exchange(in); m.modelled_s > 0.0) {
    const char* algorithm = m.algorithm == plan::Algorithm::kRing ? "ring" : "all_gather";
    std::printf("the probe's exchange (%s, %s): %.4f s on average, %.4f s on the links' model; the model's %s "
                "exchanges are taken as %.2fx their time\n",
                in.probe_codec.c_str(), algorithm, in.probe_exchange_s, m.modelled_s, algorithm, m.factor);
  }
  if (in.control_s > 0.0)
    std::printf("a small all-reduce right after an exchange (%s): %.4f s; each round's report pays it, unless a "
                "delayed exchange outlasts the steps and the report; streaming, the stop vote pays it again where "
                "the last fragment is still in flight\n", p.cluster->probe_codec.c_str(), in.control_s);
}

void print_what_if(const Recipe& recipe, const PlanInputs& in) {
  std::printf("%-10s %-10s %7s %12s %12s %10s %12s %10s %10s %10s\n", "codec", "exchange", "H", "round_s", "sync_s",
              "share", "bytes/round", "util", "delayed", "streaming");
  for (const auto& name : plan::table_codecs(recipe.compression.codec))
    for (const auto& row : plan::what_if(in, name, recipe.sync.H, recipe.sync.target_comm_share)) {
      const auto& c = row.blocking;
      const char* mark = row.overhead ? " <- overhead" : (row.recipe ? " <- recipe" : "");
      std::printf("%-10s %-10s %7d %12.3f %12.3f %10.3f %12.0f %9.1f%% %9.1f%% %9.1f%%%s\n", name.c_str(),
                  c.ring ? "ring" : "all_gather", c.H, c.round_s, c.sync_s, c.exposed_s / c.round_s, c.bytes_per_round,
                  100.0 * c.utilization, 100.0 * row.delayed_utilization, 100.0 * row.streaming_utilization, mark);
    }
  std::printf("round_s = H * step + sync_s + the round's report gather (or the probe's control time); share: the\n"
              "last two over round_s; bytes/round: all site leaders together;\n"
              "util = compute share of a blocking round; delayed, streaming: the same with that overlap (streaming:\n"
              "%d fragments, each overlapping min(H/fragments, 5) steps). '<- overhead': smallest H meeting\n"
              "sync.target_comm_share.\n",
              std::min(in.fragments, in.layers));
}

// The memory model's inputs for the recipe with `codec` and `overlap`.
plan::MemoryInputs memory_inputs(const Recipe& r, const Planning& p, const std::string& codec,
                                 const std::string& overlap, int fragments) {
  plan::MemoryInputs m;
  m.model = r.model;
  m.params = static_cast<double>(p.in.params);
  if (r.inner.kind == inner::InnerOptimizerKind::kMuon)
    m.muon_params = static_cast<double>(std::max(0LL, inner::muon_parameter_count(r.model)));
  m.batch = r.data.batch_size;
  m.bf16 = r.devices.precision == inner::Precision::kBf16;
  m.cuda = r.devices.device == inner::DeviceSetting::kCuda;
  m.codec = codec;
  m.codec_settings = codec_config(r.compression);
  m.error_feedback =
      plan::error_feedback_for(codec, r.compression.codec, r.compression.error_feedback.value_or(false));
  m.momentum = r.outer.momentum != 0.0;
  m.overlap = overlap;
  m.fragments = fragments;
  m.sites = static_cast<int>(p.in.sites.size());
  m.runtime_bytes = p.runtime;
  m.data_bytes = plan::data_bytes_of(r.data.paths, r.data.format == inner::DataFormat::kTokens, r.data.batch_size,
                                     r.model.seq_len);
  return m;
}

double in_mb(double bytes) { return bytes / 1e6; }

plan::MemoryEstimate print_memory_row(const plan::MemoryInputs& m, const char* who) {
  const auto e = plan::estimate_memory(m);
  std::printf("  %-12s %9.0f %9.0f %9.0f %9.0f %11.0f%s | %9.0f %9.0f %9.0f %9.0f %9.0f | %9.0f %9.0f\n", who,
              in_mb(e.weights), in_mb(e.grads), in_mb(e.adam), in_mb(e.autocast), in_mb(e.activations),
              e.activations_known ? " " : "?", in_mb(e.runtime), in_mb(e.data), in_mb(e.outer), in_mb(e.exchange),
              in_mb(e.allocator), in_mb(e.device()), in_mb(e.host()));
  return e;
}

// Without a cluster: a leader and another rank, on this machine.
void print_memory_here(plan::MemoryInputs in) {
  in.leader = true;
  const auto lead = print_memory_row(in, "leader");
  in.leader = false;
  const auto other = print_memory_row(in, "other ranks");
  if (in.cuda)
    std::printf("  model on a GPU (run.device): GPU memory %.0f MB a rank; host memory: leader %.0f MB, other ranks "
                "%.0f MB", in_mb(lead.device()), in_mb(lead.host()), in_mb(other.host()));
  else
    std::printf("  model on the CPU (run.device): a rank needs device + host: leader %.0f MB, other ranks %.0f MB "
                "(in use, without what the host block cache keeps: leader %.0f MB)",
                in_mb(lead.total()), in_mb(other.total()), in_mb(lead.total() - lead.allocator));
  std::printf("%s\n", lead.activations_known ? "" : " (?: a TorchScript module's activations are not known)");
}

// With a cluster: every rank against the memory it reported.
void print_memory_ranks(plan::MemoryInputs in, const ClusterSites& cluster, double runtime) {
  for (std::size_t rank = 0; rank < cluster.nodes.size(); ++rank) {
    const auto& node = cluster.nodes[rank];
    in.leader = cluster.leader[rank];
    in.cuda = node.device.rfind("cuda", 0) == 0;
    in.runtime_bytes = node.runtime_bytes > 0.0 ? node.runtime_bytes : runtime;
    char who[32];
    std::snprintf(who, sizeof who, "%zu%s", rank, in.leader ? " leader" : "");
    const auto e = print_memory_row(in, who);
    const std::string advice = plan::memory_advice(in, e, node.memory_bytes);
    std::printf("  %-12s %s: needs %.0f MB of %.0f MB%s%s\n", "", node.device.c_str(),
                in_mb(in.cuda ? e.device() : e.total()), in_mb(node.memory_bytes), advice.empty() ? ", fits" : " - ",
                advice.c_str());
  }
}

void print_memory(const Recipe& r, const Planning& p, const std::string& codec, const std::string& overlap,
                  int fragments) {
  const auto in = memory_inputs(r, p, codec, overlap, fragments);
  std::printf("\nmemory per rank, MB (batch %d, %s, codec %s, overlap %s; runtime: %s;\n"
              "  allocator: what the host block cache keeps on a CPU rank, two layers' worth of activations as measured):\n"
              "  %-12s %9s %9s %9s %9s %12s | %9s %9s %9s %9s %9s | %9s %9s\n",
              in.batch, in.bf16 ? "bf16" : "fp32", codec.c_str(), overlap.c_str(),
              p.cluster ? "as each rank measured it, else this process before any model" : "this process before any model",
              "rank", "weights", "grads", "optimizer", "autocast", "activations", "runtime", "data", "outer", "exchange",
              "allocator", "device", "host");
  if (p.cluster) print_memory_ranks(in, *p.cluster, p.runtime);
  else print_memory_here(in);
}

// The plan --goal picks, as flags and a recipe fragment, and its memory.
void print_goal(const Recipe& recipe, const PlanOptions& options, const Planning& p) {
  const plan::PlanGoal goal = plan::parse_goal(options.goal);
  plan::PlanCandidate best;
  std::string rule;
  if (!plan::recommend(p.in, plan::goal_codecs(recipe.compression.codec), goal, 1.0 - recipe.sync.target_comm_share,
                       recipe.sync.H, best, rule)) {
    std::printf("\nrecommended (goal %s): none: no codec and overlap reaches it with H in [%d, %d]\n",
                options.goal.c_str(), p.in.h_min, p.in.h_max);
    return;
  }
  std::printf("\nrecommended (goal %s; %s):\n  %s, overlap %s, H %d: round %.3f s, exposed communication %.3f s, "
              "utilization %.1f%%, %.0f bytes per round, %.3g bytes per 1B tokens; exchange %.3f s (%s)\n",
              options.goal.c_str(), rule.c_str(), best.codec.c_str(), best.overlap.c_str(), best.H, best.round_s,
              best.exposed_s, 100.0 * best.utilization, best.bytes_per_round, best.bytes_per_billion_tokens,
              best.sync_s, best.ring ? "ring" : "all_gather");
  std::printf("as flags:\n  %s\nas a recipe fragment:\n%s", plan::as_sets(best).c_str(), plan::as_toml(best).c_str());
  if (best.codec != recipe.compression.codec || best.overlap != overlap_name(recipe.sync.overlap))
    print_memory(recipe, p, best.codec, best.overlap, best.fragments);
}

int input_error(const std::string& what) {
  std::cerr << "diloco: error: " << what << std::endl;
  return 2;
}

}  // namespace

int run_plan(const Recipe& recipe, const PlanOptions& options) {
  try {
    const Planning p = gather(recipe, options);
    print_inputs(recipe, options, p);
    print_what_if(recipe, p.in);
    const bool streaming = recipe.sync.overlap == outer::OverlapMode::kStreaming;
    print_memory(recipe, p, recipe.compression.codec, overlap_name(recipe.sync.overlap),
                 streaming ? std::max(1, recipe.sync.fragments) : 1);
    if (!options.goal.empty()) print_goal(recipe, options, p);
    return 0;
  } catch (const RecipeError& e) {
    return input_error(e.what());
  } catch (const plan::InputError& e) {
    return input_error(e.what());
  } catch (const inner::DataError& e) {
    return input_error(std::string("data: ") + e.what());
  }
}

}  // namespace diloco::app
