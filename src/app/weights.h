// Weights in and out of diloco: model.init_from (round 1 starts from a
// safetensors file or another run's checkpoint) and `diloco export` (a
// checkpoint's global parameters as safetensors, named as the model names
// them: Hugging Face's Llama layout for llama).
#pragma once

#include <string>

#include "app/recipe.h"
#include "inner/inner_loop.h"

namespace diloco::app {

// Loads model.init_from into `loop` when it is set. Throws
// inner::WeightsError naming the file and what does not fit.
void init_weights(const Recipe& recipe, inner::InnerLoop& loop);

// `diloco export CKPT --format safetensors --out FILE`; returns the exit code.
int run_export(int argc, char** argv);

}  // namespace diloco::app
