// Inner learning-rate schedule: linear warm-up, then cosine decay to a floor
// (DiLoCo, Douillard et al. 2023, uses warm-up then cosine for AdamW).
#pragma once

#include <cstdint>

namespace diloco::inner {

struct LrSchedule {
  double peak_lr = 4e-4;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  double min_lr_ratio = 0.1;

  // Learning rate of the 0-based inner step `step`.
  double at(std::int64_t step) const;
};

}  // namespace diloco::inner
