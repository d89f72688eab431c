// `diloco plan RECIPE`: what-if table of round time, communication share and
// bytes for candidate H and codecs, from the link model and a step time.
#pragma once

#include <optional>
#include <string>

#include "app/recipe.h"

namespace diloco::app {

struct PlanOptions {
  std::string links_file;         // links.json from `diloco probe`; empty: the recipe's [links]
  std::optional<double> step_s;   // inner-step time; unset: measured here
  std::string cluster_file;       // a cluster file from `diloco probe --all-ranks`: sites, links and step times from it
  std::string goal;               // "utilization=U", "bytes" or "time": print the plan it picks; empty: none
};

// No MPI. Returns the exit code.
int run_plan(const Recipe& recipe, const PlanOptions& options);

}  // namespace diloco::app
