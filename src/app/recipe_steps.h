// The recipe's inner step as the planner times it: the step's setup from the
// recipe, its dataset loaded, then plan::measure_model (step_timing.h).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "app/recipe.h"
#include "plan/measure/step_timing.h"

namespace diloco::app {

// Without `time_steps`, a GPT or Llama is counted, not built. Throws
// RecipeError or inner::DataError.
plan::MeasuredModel measure_recipe(
    const Recipe& recipe, const inner::DeviceConfig& device, bool time_steps, const std::function<void()>& ready = {},
    const std::function<std::unique_ptr<plan::BackgroundBursts>(std::size_t, double)>& traffic = {});

}  // namespace diloco::app
