// A scripted PyTorch module (torch.jit.save) behind Model: the one way a
// model defined in Python trains from C++.
#pragma once

#include <memory>

#include "inner/models/model.h"

namespace diloco::inner {

// Loads config.path and checks its contract with a dry forward on a tiny
// batch: int64 ids [B, T] (ids up to config.vocab - 1) give float32 logits
// [B, T, config.vocab]. Throws ModelError naming the file and the problem.
std::unique_ptr<Model> load_torchscript_model(const ModelConfig& config);

}  // namespace diloco::inner
