// `diloco plan RECIPE`: what-if table of round time, communication share and
// bytes for candidate H and codecs, from the link model and a step time.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/recipe.h"
#include "inner/inner_loop.h"

namespace diloco::app {

struct PlanOptions {
  std::string links_file;         // links.json from `diloco probe`; empty: the recipe's [links]
  std::optional<double> step_s;   // inner-step time; unset: measured here
  std::string cluster_file;       // a cluster file from `diloco probe --all-ranks`: sites, links and step times from it
  std::string goal;               // "utilization=U", "bytes" or "time": print the plan it picks; empty: none
};

// The recipe's model built on `device`: its parameter count and (with
// `time_steps`) its inner-step time in seconds, the median of a few short
// runs after a warm-up, so one slow burst of the machine does not set it.
// Throws RecipeError or inner::DataError.
struct MeasuredModel {
  std::size_t params = 0;
  double step_s = 0.0;
  std::vector<double> steps;  // lined up (`ready` given): each timed step, in order
};
// `ready`, when given, runs once the model and data are built and before
// any step is timed (the probe lines every rank up there, so all time their
// steps at once, as they will train); the step is then the mean over 5 s of
// steps (8 at least), the same stretch of time on every rank.
MeasuredModel measure_model(const Recipe& recipe, const inner::DeviceConfig& device, bool time_steps,
                            const std::function<void()>& ready = {});

// No MPI. Returns the exit code.
int run_plan(const Recipe& recipe, const PlanOptions& options);

}  // namespace diloco::app
