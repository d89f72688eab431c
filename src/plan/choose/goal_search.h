// Choosing a plan: the goal a user states (`plan --goal`), the search over
// codecs, overlap modes and H that meets it with the round model, and the
// plan as `--set` flags and a recipe fragment.
#pragma once

#include <string>
#include <vector>

#include "plan/model/round_model.h"

namespace diloco::plan {

// A goal: "utilization=U" (U in (0, 1)), "bytes" or "time".
struct PlanGoal {
  enum class Kind { kUtilization, kBytes, kTime } kind = Kind::kUtilization;
  double utilization = 0.95;
};
// Throws InputError for anything else, naming --goal.
PlanGoal parse_goal(const std::string& text);

// The plan the goal picks among `codecs` (in order of preference: the codec
// that keeps more of the pseudo-gradient first) and the three overlap modes,
// and the rule that picked it (one line):
//   utilization=U: the smallest H reaching U (DiLoCo's loss grows with H);
//     ties to the earlier codec, then blocking, delayed, streaming (fresher).
//   bytes: the fewest bytes per token with utilization >= `floor`.
//   time: the shortest round at H = `recipe_H` (not the highest utilization,
//     which steps slowed beside an exchange raise); ties to fewer bytes.
// Returns false when no candidate meets the goal within [h_min, h_max].
bool recommend(const PlanInputs& in, const std::vector<std::string>& codecs, const PlanGoal& goal, double floor,
               int recipe_H, PlanCandidate& best, std::string& rule);

// `--set` arguments and a TOML fragment that make a recipe run `c`.
std::string as_sets(const PlanCandidate& c);
std::string as_toml(const PlanCandidate& c);

}  // namespace diloco::plan
