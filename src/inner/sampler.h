// Text from a model: temperature and top-k sampling from a seeded generator,
// greedy at temperature 0, with the model's key/value cache when it has one
// (each new token then costs one position) and a sliding window past its
// context.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "inner/models/model.h"

namespace diloco::inner {

struct SampleOptions {
  int tokens = 200;          // new tokens to generate
  double temperature = 0.8;  // 0: the most likely token every time
  int top_k = 0;             // sample among the k most likely (0: all)
  std::uint64_t seed = 0;
  bool use_cache = true;     // false: recompute the whole window for each token (the baseline)
  std::vector<std::int64_t> stop;  // ids that end the sample (included in the output)
  // Only ids below this are chosen (a tokenizer with fewer pieces than the
  // model's vocabulary cannot decode the rest); 0: the whole vocabulary.
  std::int64_t id_limit = 0;
};

// The ids that follow `prompt` (not empty). Past the model's context the
// window slides: the newest half of the context is kept and re-read. Each
// new id is passed to `on_token` as it is chosen. Throws
// std::invalid_argument for an empty prompt or an id outside the vocabulary.
std::vector<std::int64_t> sample(Model& model, const std::vector<std::int64_t>& prompt, const SampleOptions& options,
                                 const torch::Device& device,
                                 const std::function<void(std::int64_t)>& on_token = {});

}  // namespace diloco::inner
