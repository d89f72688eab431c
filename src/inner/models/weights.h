// A model's parameters by name: loaded from a safetensors file (a shape
// mismatch, a missing or an unexpected tensor is an error that lists them),
// and laid out by name and shape for writing one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inner/models/model.h"
#include "inner/models/safetensors.h"

namespace diloco::inner {

// Copies every parameter of `model` from `file` (F32, F16 or BF16). Throws
// WeightsError naming the file and the first few offending tensors, with
// both shapes for a mismatch, before anything is written.
void load_weights(Model& model, const SafetensorsFile& file);

// The same from several files (a sharded folder); `source` names them in
// messages. A tensor in two files is an error.
void load_weights(Model& model, const std::vector<const SafetensorsFile*>& files, const std::string& source);

// From a safetensors file, or a model folder (hf_folder.h).
void load_weights(Model& model, const std::string& path);

struct ParameterShape {
  std::string name;
  std::vector<std::int64_t> shape;
};

// Names and shapes in the order the flat parameter buffer lays them out.
std::vector<ParameterShape> parameter_layout(Model& model);

}  // namespace diloco::inner
