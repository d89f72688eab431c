// The recipe's inner step, timed (see recipe_steps.h).
#include "app/recipe_steps.h"

#include "app/train_command.h"

namespace diloco::app {

plan::MeasuredModel measure_recipe(
    const Recipe& recipe, const inner::DeviceConfig& device, bool time_steps, const std::function<void()>& ready,
    const std::function<std::unique_ptr<plan::BackgroundBursts>(std::size_t, double)>& traffic) {
  if (!time_steps && recipe.model.kind != inner::ModelKind::kTorchScript) {  // counted without building it
    plan::MeasuredModel m;
    m.params = static_cast<std::size_t>(inner::parameter_count(recipe.model));
    return m;
  }
  const auto data = load_dataset(recipe);
  plan::StepSetup setup;
  setup.model = recipe.model;
  setup.optim = recipe.inner;
  setup.data = recipe.data;
  setup.dataset = &data;
  setup.threads = recipe.run.threads;
  setup.seed = static_cast<std::uint64_t>(recipe.run.seed);
  return plan::measure_model(setup, device, time_steps, ready, traffic);
}

}  // namespace diloco::app
