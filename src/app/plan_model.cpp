// The planner's round model and the choice a goal makes (see plan_model.h).
#include "app/plan_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <vector>

#include "app/recipe.h"
#include "diloco/compression/codec.h"

namespace diloco::app {

std::unique_ptr<compression::Codec> plan_codec(const std::string& name, std::uint32_t block, double topk_ratio) {
  compression::CodecConfig config;
  config.name = name;
  config.block = block;
  config.topk_ratio = topk_ratio;
  std::string error;
  auto codec = compression::make_codec(config, &error);
  if (!codec) throw RecipeError("plan: codec " + name + ": " + error);
  return codec;
}

namespace {

double transfer(const comm::LinkEstimate& l, double bytes) {
  return l.latency_s + (l.bandwidth_bytes_per_s > 0.0 ? bytes / l.bandwidth_bytes_per_s : 0.0);
}

struct Exchange {
  double seconds = 0.0;
  double bytes = 0.0;  // all leaders together
  bool ring = false;
};

// One exchange of `values` values with `codec` between the leaders.
Exchange exchange(const PlanInputs& in, const compression::Codec& codec, std::size_t values) {
  const int n = static_cast<int>(in.links.size());
  Exchange e;
  if (n < 2) return e;
  double metadata = 0.0;  // the weight and report gathers: one small message each
  double gather = 0.0, hop = 0.0;
  const double payload = static_cast<double>(codec.payload_size(values)) + 8.0;
  const double chunk = static_cast<double>(codec.payload_size((values + n - 1) / n));
  for (int a = 0; a < n; ++a) {
    hop = std::max(hop, transfer(in.links[a][(a + 1) % n], chunk));
    for (int b = 0; b < n; ++b)
      if (a != b) {
        metadata = std::max(metadata, 2.0 * transfer(in.links[a][b], 64));
        gather = std::max(gather, transfer(in.links[a][b], payload));
      }
  }
  // As the exchange decides: the ring when it sends fewer bytes (never for 2 sites).
  e.ring = n >= 3 && 2.0 * (n - 1) * chunk < (n - 1) * payload;
  e.seconds = metadata + (e.ring ? 2.0 * (n - 1) * hop : gather);
  e.bytes = e.ring ? 2.0 * (n - 1) * chunk * n : static_cast<double>(n - 1) * payload * n;
  return e;
}

std::unique_ptr<compression::Codec> codec_of(const PlanInputs& in, const std::string& name) {
  return plan_codec(name, in.block, in.topk_ratio);
}

int overlap_rank(const std::string& o) { return o == "none" ? 0 : (o == "delayed" ? 1 : 2); }

// The mean over windows of h consecutive steps of the largest of `floor` and
// the slowest site's sum (sliding windows); with fewer than 2 h steps in a
// series, the largest of `floor` and h times the slowest site's mean step.
double slowest_window(const std::vector<std::vector<double>>& sites, int H, double floor) {
  const auto h = static_cast<std::size_t>(std::max(H, 1));
  std::size_t n = std::numeric_limits<std::size_t>::max();
  double slowest_mean = 0.0;
  for (const auto& s : sites) {
    n = std::min(n, s.size());
    slowest_mean = std::max(slowest_mean, std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size()));
  }
  if (n < 2 * h) return std::max(floor, H * slowest_mean);
  std::vector<std::vector<double>> prefix;
  for (const auto& s : sites) {
    prefix.emplace_back(n + 1, 0.0);
    for (std::size_t k = 0; k < n; ++k) prefix.back()[k + 1] = prefix.back()[k] + s[k];
  }
  double total = 0.0;
  for (std::size_t k = 0; k + h <= n; ++k) {
    double slowest = floor;
    for (const auto& p : prefix) slowest = std::max(slowest, p[k + h] - p[k]);
    total += slowest;
  }
  return total / static_cast<double>(n - h + 1);
}

// The mean of f(sync_s times each of the spread's factors) (f(sync_s)
// without a spread).
template <typename F>
double over_spread(const PlanInputs& in, double sync_s, F f) {
  if (in.exchange_spread.empty()) return f(sync_s);
  double total = 0.0;
  for (double r : in.exchange_spread) total += f(sync_s * r);
  return total / static_cast<double>(in.exchange_spread.size());
}

// What a round's boundary adds (see plan_model.h): the report's control_s,
// and the vote's in the share of the spread's exchange times over `covered`
// (an overlapped exchange against the steps beside it; blocking: none).
double boundary_s(const PlanInputs& in, double sync_s, double covered, bool overlapped) {
  if (in.control_s <= 0.0) return 0.0;
  if (!overlapped) return in.control_s;
  const double vote = over_spread(in, sync_s, [covered](double s) { return s > covered ? 1.0 : 0.0; });
  return in.control_s * (1.0 + vote);
}

}  // namespace

double round_compute_s(const PlanInputs& in, int H, double overlapped, double floor) {
  const double f = std::clamp(overlapped, 0.0, 1.0);
  // A step's expected cost when f of the steps run beside the exchange.
  const auto scale = [&](std::size_t s) {
    const double slowdown = s < in.site_overlap_slowdown.size() ? std::max(1.0, in.site_overlap_slowdown[s]) : 1.0;
    return (1.0 - f) + f * slowdown;
  };
  if (in.site_steps.empty()) {
    double worst = 1.0;
    for (std::size_t s = 0; s < in.site_overlap_slowdown.size(); ++s) worst = std::max(worst, scale(s));
    return std::max(floor, H * in.step_s * worst);
  }
  if (f == 0.0 || in.site_overlap_slowdown.empty()) return slowest_window(in.site_steps, H, floor);
  auto busy = in.site_steps;
  for (std::size_t s = 0; s < busy.size(); ++s)
    for (auto& t : busy[s]) t *= scale(s);
  return slowest_window(busy, H, floor);
}

PlanCandidate evaluate(const PlanInputs& in, const std::string& codec_name, const std::string& overlap, int H) {
  const auto codec = codec_of(in, codec_name);
  PlanCandidate c;
  c.codec = codec_name;
  c.overlap = overlap;
  c.H = H;
  // Overlapped, the steps the exchange is in flight for run slower: its
  // share of the round's steps.
  const double plain = round_compute_s(in, H);
  const auto in_flight = [plain](double sync_s) { return plain > 0.0 ? sync_s / plain : 1.0; };
  double compute = plain;
  if (overlap == "streaming") {
    c.fragments = std::max(1, std::min({in.fragments, in.layers, H}));
    c.tau = std::max(1, std::min(H / c.fragments, 5));
    const auto one = exchange(in, *codec, (in.params + c.fragments - 1) / c.fragments);
    c.ring = one.ring;
    c.sync_s = c.fragments * one.seconds;
    compute = round_compute_s(in, H, in_flight(c.sync_s));
    const double covered = c.tau * compute / H;
    c.exposed_s = c.fragments * over_spread(in, one.seconds, [&](double s) {
      return std::max(0.0, s - covered);
    }) + boundary_s(in, one.seconds, covered, true);
    c.bytes_per_round = c.fragments * one.bytes;
  } else {
    const auto whole = exchange(in, *codec, in.params);
    c.ring = whole.ring;
    c.sync_s = whole.seconds;
    if (overlap == "delayed") {
      // A round ends when both its steps and the exchange beside them have:
      // the mean over windows and exchange times of the larger of the two.
      const double f = in_flight(c.sync_s);
      compute = round_compute_s(in, H, f);
      c.exposed_s = over_spread(in, c.sync_s, [&](double s) { return round_compute_s(in, H, f, s); }) -
                    compute + boundary_s(in, c.sync_s, compute, true);
    } else {
      c.exposed_s = whole.seconds + boundary_s(in, c.sync_s, 0.0, false);
    }
    c.bytes_per_round = whole.bytes;
  }
  c.round_s = compute + c.exposed_s;
  c.utilization = c.round_s > 0.0 ? compute / c.round_s : 1.0;
  const double tokens = H * in.tokens_per_step;
  c.bytes_per_billion_tokens = tokens > 0.0 ? c.bytes_per_round / tokens * 1e9 : 0.0;
  return c;
}

PlanGoal parse_goal(const std::string& text) {
  PlanGoal g;
  if (text == "bytes") {
    g.kind = PlanGoal::Kind::kBytes;
  } else if (text == "time") {
    g.kind = PlanGoal::Kind::kTime;
  } else if (text.rfind("utilization=", 0) == 0) {
    const std::string v = text.substr(12);
    char* end = nullptr;
    g.utilization = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(g.utilization > 0.0 && g.utilization < 1.0))
      throw RecipeError("--goal utilization=U needs U in (0, 1), got '" + v + "'");
  } else {
    throw RecipeError("--goal must be utilization=U, bytes or time, got '" + text + "'");
  }
  return g;
}

bool recommend(const PlanInputs& in, const std::vector<std::string>& codecs, const PlanGoal& goal, double floor,
               int recipe_H, PlanCandidate& best, std::string& rule) {
  bool found = false;
  auto better = [&](const PlanCandidate& c, std::size_t codec_index, std::size_t best_index) {
    if (!found) return true;
    switch (goal.kind) {
      case PlanGoal::Kind::kUtilization:
        if (c.H != best.H) return c.H < best.H;
        break;
      case PlanGoal::Kind::kBytes:
        if (c.bytes_per_billion_tokens != best.bytes_per_billion_tokens)
          return c.bytes_per_billion_tokens < best.bytes_per_billion_tokens;
        if (c.H != best.H) return c.H < best.H;
        break;
      case PlanGoal::Kind::kTime:
        // The shortest round, not the highest utilization: steps slowed by
        // an exchange beside them raise a round's compute, and with it its
        // utilization, while the round gets longer.
        if (std::abs(c.round_s - best.round_s) > 1e-9) return c.round_s < best.round_s;
        if (c.bytes_per_round != best.bytes_per_round) return c.bytes_per_round < best.bytes_per_round;
        break;
    }
    if (codec_index != best_index) return codec_index < best_index;
    return overlap_rank(c.overlap) < overlap_rank(best.overlap);
  };
  std::size_t best_index = 0;
  for (std::size_t i = 0; i < codecs.size(); ++i)
    for (const char* overlap : {"none", "delayed", "streaming"}) {
      if (goal.kind == PlanGoal::Kind::kTime) {
        const auto c = evaluate(in, codecs[i], overlap, recipe_H);
        if (better(c, i, best_index)) best = c, best_index = i, found = true;
        continue;
      }
      const double need = goal.kind == PlanGoal::Kind::kUtilization ? goal.utilization : floor;
      // Utilization grows with H in every mode: the smallest H that reaches
      // it, by bisection over [h_min, h_max].
      int lo = in.h_min, hi = in.h_max;
      if (evaluate(in, codecs[i], overlap, hi).utilization < need) continue;
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (evaluate(in, codecs[i], overlap, mid).utilization >= need) hi = mid;
        else lo = mid + 1;
      }
      const auto c = evaluate(in, codecs[i], overlap, lo);
      if (better(c, i, best_index)) best = c, best_index = i, found = true;
    }
  char line[256];
  switch (goal.kind) {
    case PlanGoal::Kind::kUtilization:
      std::snprintf(line, sizeof line,
                    "the smallest H reaching utilization %.3f; ties to the codec listed first, then blocking, "
                    "delayed, streaming", goal.utilization);
      break;
    case PlanGoal::Kind::kBytes:
      std::snprintf(line, sizeof line,
                    "the fewest bytes per token with utilization >= %.3f (1 - sync.target_comm_share), "
                    "each mode at the smallest H reaching it", floor);
      break;
    case PlanGoal::Kind::kTime:
      std::snprintf(line, sizeof line, "the shortest round at the recipe's H = %d; ties to fewer bytes", recipe_H);
      break;
  }
  rule = line;
  return found;
}

std::string as_sets(const PlanCandidate& c) {
  std::string s = "--set compression.codec=" + c.codec + " --set sync.H=" + std::to_string(c.H) +
                  " --set sync.overlap=" + c.overlap;
  if (c.overlap == "streaming")
    s += " --set sync.fragments=" + std::to_string(c.fragments) + " --set sync.overlap_steps=" + std::to_string(c.tau);
  return s;
}

std::string as_toml(const PlanCandidate& c) {
  std::string s = "[compression]\ncodec = \"" + c.codec + "\"\n[sync]\nH = " + std::to_string(c.H) +
                  "\noverlap = \"" + c.overlap + "\"\n";
  if (c.overlap == "streaming")
    s += "fragments = " + std::to_string(c.fragments) + "\noverlap_steps = " + std::to_string(c.tau) + "\n";
  return s;
}

}  // namespace diloco::app
