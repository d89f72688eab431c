// The what-if table (see what_if.h).
#include "plan/choose/what_if.h"

#include <algorithm>
#include <cmath>

namespace diloco::plan {

std::vector<std::string> table_codecs(const std::string& recipe_codec) {
  std::vector<std::string> codecs{recipe_codec};
  for (const char* c : {"none", "fp16", "int8", "int4", "topk"})
    if (std::find(codecs.begin(), codecs.end(), c) == codecs.end()) codecs.push_back(c);
  return codecs;
}

std::vector<std::string> goal_codecs(const std::string& recipe_codec) {
  std::vector<std::string> codecs{"none", "fp16", "int8", "int4"};
  if (std::find(codecs.begin(), codecs.end(), recipe_codec) == codecs.end()) codecs.push_back(recipe_codec);
  return codecs;
}

int overhead_H(const PlanInputs& in, const std::string& codec, double target_share) {
  const double sync = evaluate(in, codec, "none", 1).exposed_s;  // the exchange and the round's report
  const double f = target_share;
  const double h = std::ceil(sync * (1.0 - f) / (f * in.step_s));
  return static_cast<int>(std::clamp(h, static_cast<double>(in.h_min), static_cast<double>(in.h_max)));
}

std::vector<WhatIfRow> what_if(const PlanInputs& in, const std::string& codec, int recipe_H, double target_share) {
  const int overhead = overhead_H(in, codec, target_share);
  std::vector<int> candidates{recipe_H, overhead, 10, 50, 100, 500};
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<WhatIfRow> rows;
  for (int h : candidates) {
    WhatIfRow row;
    row.blocking = evaluate(in, codec, "none", h);
    row.delayed_utilization = evaluate(in, codec, "delayed", h).utilization;
    row.streaming_utilization = evaluate(in, codec, "streaming", h).utilization;
    row.overhead = h == overhead;
    row.recipe = h == recipe_H;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace diloco::plan
