// The goal search (see goal_search.h).
#include "plan/choose/goal_search.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "plan/input_error.h"

namespace diloco::plan {
namespace {

int overlap_rank(const std::string& o) { return o == "none" ? 0 : (o == "delayed" ? 1 : 2); }

// The one line that says how `goal` picked.
std::string rule_text(const PlanGoal& goal, double floor, int recipe_H) {
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
  return line;
}

}  // namespace

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
      throw InputError("--goal utilization=U needs U in (0, 1), got '" + v + "'");
  } else {
    throw InputError("--goal must be utilization=U, bytes or time, got '" + text + "'");
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
  rule = rule_text(goal, floor, recipe_H);
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

}  // namespace diloco::plan
