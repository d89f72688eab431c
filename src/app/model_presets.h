// Named model sizes for `model.preset`: the DiLoCo paper's decoders and small
// ones for tests and benchmarks. Explicit model.* keys override a preset.
#pragma once

#include <string>
#include <vector>

#include "inner/model_config.h"

namespace diloco::app {

struct ModelPreset {
  std::string name;
  inner::ModelConfig config;  // seq_len is left to the recipe
  std::string about;
};

const std::vector<ModelPreset>& model_presets();
// nullptr when there is no preset of that name.
const ModelPreset* find_model_preset(const std::string& name);

}  // namespace diloco::app
