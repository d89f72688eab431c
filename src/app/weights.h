// Weights in and out of diloco: model.init_from (round 1 starts from a
// safetensors file, a model folder or another run's checkpoint) and
// `diloco export` (a checkpoint's global parameters as safetensors, or as a
// model folder Hugging Face's libraries open: Llama layout for llama).
#pragma once

#include <string>

#include "app/recipe.h"
#include "inner/inner_loop.h"

namespace diloco::app {

// Loads model.init_from into `loop` when it is set (a model folder's
// architecture is already in the recipe). Throws inner::WeightsError naming
// the file and what does not fit.
void init_weights(const Recipe& recipe, inner::InnerLoop& loop);

// `diloco export CKPT|FOLDER [--format safetensors|hf] --out PATH`; returns the exit code.
int run_export(int argc, char** argv);

}  // namespace diloco::app
