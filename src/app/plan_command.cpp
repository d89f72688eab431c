// The analytical model behind `plan`: a blocking round costs
// H * t_step + T_sync, where T_sync is the metadata gathers (one latency each)
// plus the pseudo-gradient exchange on the slowest link:
//   all-gather: max over pairs of (alpha + payload / beta)
//   ring:       2 (n - 1) * max over ring links of (alpha + payload / n / beta)
// The step time is measured with the recipe's model and batch on this machine.
#include "app/plan_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "diloco/compression/codec.h"
#include "app/train_command.h"
#include "inner/inner_loop.h"

namespace diloco::app {
namespace {

struct PairLink {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;  // 0: unlimited
};

double transfer(const PairLink& l, double bytes) {
  return l.latency_s + (l.bytes_per_s > 0.0 ? bytes / l.bytes_per_s : 0.0);
}

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
  std::vector<std::vector<PairLink>> m(sites, std::vector<PairLink>(sites));
  std::vector<std::vector<bool>> seen(sites, std::vector<bool>(sites, false));
  int index = 0;
  for (const auto& link : doc["links"]) {
    const std::string at = where + ": links[" + std::to_string(index++) + "]";
    auto number = [&](const char* key) {
      if (!link.is_object() || !link.contains(key) || !link[key].is_number())
        throw RecipeError(at + ": missing number \"" + key + "\"");
      const double v = link[key].get<double>();
      if (!std::isfinite(v) || v < 0.0) throw RecipeError(at + "." + key + " must be a number >= 0");
      return v;
    };
    const double a_value = number("a"), b_value = number("b");
    const int a = static_cast<int>(a_value), b = static_cast<int>(b_value);
    if (a != a_value || b != b_value || a >= sites || b >= sites || a == b)
      throw RecipeError(at + ": pair (" + std::to_string(a_value) + ", " + std::to_string(b_value) +
                        ") is not two sites of topology.sites = " + std::to_string(sites));
    if (seen[a][b]) throw RecipeError(at + ": pair (" + std::to_string(a) + ", " + std::to_string(b) + ") given twice");
    seen[a][b] = seen[b][a] = true;
    m[a][b] = m[b][a] = PairLink{number("latency_ms") / 1000.0, number("bandwidth_mbps") * 1e6 / 8.0};
  }
  if (index != sites * (sites - 1) / 2)
    throw RecipeError(where + ": " + std::to_string(index) + " pairs for " + std::to_string(sites) + " sites");
  return m;
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


}  // namespace

int run_plan(const Recipe& recipe, const PlanOptions& options) {
  const int n = recipe.topology.sites;
  std::vector<std::vector<PairLink>> links;
  double step_s = 0.0;
  std::size_t params = 0;
  try {
    links = options.links_file.empty() ? links_from_recipe(recipe) : links_from_json(options.links_file, n);
    inner::set_compute_threads(recipe.run.threads);
    inner::SoloGroup solo;
    const auto data = load_dataset(recipe);
    inner::InnerLoop loop(recipe.model, recipe.inner, recipe.data, data, {}, solo,
                          static_cast<std::uint64_t>(recipe.run.seed), 1000);
    params = loop.num_params();
    if (options.step_s) {
      step_s = *options.step_s;
    } else {
      // Median of a few short runs after a warm-up, so one slow burst of the
      // machine does not set the plan.
      loop.run(5);
      std::vector<double> samples;
      for (int i = 0; i < 7; ++i) samples.push_back(loop.run(4).seconds / 4.0);
      std::sort(samples.begin(), samples.end());
      step_s = samples[samples.size() / 2];
    }
  } catch (const RecipeError& e) {
    std::cerr << "diloco: error: " << e.what() << std::endl;
    return 2;
  } catch (const inner::DataError& e) {
    std::cerr << "diloco: error: data: " << e.what() << std::endl;
    return 2;
  }

  double metadata_s = 0.0;  // the weight and report gathers: one small message each
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) metadata_s = std::max(metadata_s, 2.0 * transfer(links[a][b], 64));
  auto sync_time = [&](const compression::Codec& codec, bool& ring) {
    const double payload = static_cast<double>(codec.payload_size(params)) + 8.0;
    double gather = 0.0;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) gather = std::max(gather, transfer(links[a][b], payload));
    double ring_hop = 0.0;
    const double chunk = static_cast<double>(codec.payload_size((params + n - 1) / n));
    for (int a = 0; a < n; ++a) ring_hop = std::max(ring_hop, transfer(links[a][(a + 1) % n], chunk));
    // As the exchange decides: the ring when it sends fewer bytes (never for 2 sites).
    ring = n >= 3 && 2.0 * (n - 1) * chunk < (n - 1) * payload;
    return metadata_s + (ring ? 2.0 * (n - 1) * ring_hop : gather);
  };

  std::printf("plan for %s: %d sites, %zu params, inner step %.4f s (%s), target share %.2f\n",
              recipe.run.name.c_str(), n, params, step_s, options.step_s ? "given" : "measured here, one rank",
              recipe.sync.target_comm_share);
  std::printf("%-10s %-10s %7s %12s %12s %10s %12s %10s\n", "codec", "exchange", "H", "round_s", "sync_s", "share",
              "bytes/round", "util");
  std::vector<std::string> codecs{recipe.compression.codec};
  for (const char* c : {"none", "fp16", "int8", "int4", "topk"})
    if (std::find(codecs.begin(), codecs.end(), c) == codecs.end()) codecs.push_back(c);
  for (const auto& name : codecs) {
    compression::CodecConfig config;
    config.name = name;
    config.block = static_cast<std::uint32_t>(recipe.compression.block);
    config.topk_ratio = recipe.compression.topk_ratio;
    auto codec = compression::make_codec(config);
    bool ring = false;
    const double sync = sync_time(*codec, ring);
    const double f = recipe.sync.target_comm_share;
    const int overhead_H = static_cast<int>(std::clamp(std::ceil(sync * (1.0 - f) / (f * step_s)),
                                                       static_cast<double>(recipe.sync.h_min),
                                                       static_cast<double>(recipe.sync.h_max)));
    std::vector<int> candidates{recipe.sync.H, overhead_H};
    for (int h : {10, 50, 100, 500}) candidates.push_back(h);
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    const double bytes = ring ? 2.0 * (n - 1) * static_cast<double>(codec->payload_size((params + n - 1) / n)) * n
                              : static_cast<double>(n - 1) * static_cast<double>(codec->payload_size(params)) * n;
    for (int h : candidates) {
      const double round_s = h * step_s + sync;
      const char* mark = h == overhead_H ? " <- overhead" : (h == recipe.sync.H ? " <- recipe" : "");
      std::printf("%-10s %-10s %7d %12.3f %12.3f %10.3f %12.0f %9.1f%%%s\n", name.c_str(), ring ? "ring" : "all_gather",
                  h, round_s, sync, sync / round_s, bytes, 100.0 * (1.0 - sync / round_s), mark);
    }
  }
  std::printf("round_s = H * step + sync_s; share = sync_s / round_s; bytes/round: all site leaders together;\n"
              "util = compute share of a blocking round. '<- overhead': smallest H meeting sync.target_comm_share.\n");
  return 0;
}

}  // namespace diloco::app
