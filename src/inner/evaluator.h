// Next-token loss of a model over a whole token stream (diloco eval): every id
// after the first is predicted once, in windows of the model's context,
// split across replicas by window.
#pragma once

#include <cstdint>

#include "inner/data/dataset.h"
#include "inner/models/model.h"

namespace diloco::inner {

struct EvalTotals {
  double nats = 0.0;        // summed cross-entropy
  std::int64_t tokens = 0;  // ids predicted
};

struct EvalWindows {
  int seq_len = 64;   // ids predicted per window: window k reads ids [k*seq_len, k*seq_len + seq_len + 1)
  int batch = 8;      // windows per forward pass
  int replica = 0;    // this replica takes windows replica, replica + replicas, ...
  int replicas = 1;
  std::int64_t max_tokens = 0;  // evaluate the first this many ids only (0: all)
};

// Sums the model's loss over `source` (ids checked against the model's
// vocabulary; DataError names the file and offset of one that is not) on
// `device`, without gradients.
EvalTotals evaluate(Model& model, const TokenSource& source, const EvalWindows& windows, const torch::Device& device);

}  // namespace diloco::inner
