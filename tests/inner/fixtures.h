// Shared inputs of the inner-loop tests: a small repetitive corpus, a tiny
// GPT and an optimizer setting that learns within a few dozen steps.
#pragma once

#include <string>
#include <vector>

#include "inner/data/memory_tokens.h"
#include "inner/inner_loop.h"
#include "inner/model_config.h"

namespace diloco::inner::testing {

inline Dataset small_corpus() {
  std::string s;
  const char* lines[] = {"the quick brown fox jumps over the lazy dog. ", "a stitch in time saves nine. ",
                         "all that glitters is not gold. ", "to be or not to be, that is the question. "};
  for (int i = 0; s.size() < 60000; ++i) s += lines[(i * 3 + i / 5) % 4];
  return bytes_dataset("fixture", s, 0.1);
}

inline ModelConfig tiny(int layers = 1) {
  ModelConfig m;
  m.d_model = 32;
  m.n_layers = layers;
  m.n_heads = 2;
  m.seq_len = 16;
  return m;
}

inline InnerOptimConfig fast() {
  InnerOptimConfig o;
  o.lr = 3e-3;
  o.warmup_steps = 5;
  return o;
}

}  // namespace diloco::inner::testing
