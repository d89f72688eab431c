// The what-if table `diloco plan` prints: for each codec, the blocking round
// at candidate H (the recipe's, the smallest meeting the target share, and a
// few round numbers) with the utilization delayed and streaming overlap
// would reach at the same H; and the codecs a goal may choose among.
#pragma once

#include <string>
#include <vector>

#include "plan/model/round_model.h"

namespace diloco::plan {

struct WhatIfRow {
  PlanCandidate blocking;
  double delayed_utilization = 0.0;
  double streaming_utilization = 0.0;
  bool overhead = false;  // the smallest H meeting the target share
  bool recipe = false;    // the recipe's H
};

// The table's codecs: the recipe's first, then none, fp16, int8, int4, topk.
std::vector<std::string> table_codecs(const std::string& recipe_codec);

// The codecs a goal chooses among, those that keep more first; top-k only
// when the recipe names it.
std::vector<std::string> goal_codecs(const std::string& recipe_codec);

// The smallest H in [h_min, h_max] whose blocking round spends at most
// `target_share` communicating (the exchange and the round's report, T):
// H >= T (1 - f) / (f step_s).
int overhead_H(const PlanInputs& in, const std::string& codec, double target_share);

// `codec`'s rows, by H.
std::vector<WhatIfRow> what_if(const PlanInputs& in, const std::string& codec, int recipe_H, double target_share);

}  // namespace diloco::plan
