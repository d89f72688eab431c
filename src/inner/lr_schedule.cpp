// Warm-up plus cosine decay.
#include "inner/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace diloco::inner {

double LrSchedule::at(std::int64_t step) const {
  if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const std::int64_t decay_steps = std::max<std::int64_t>(1, total_steps - warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return peak_lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

}  // namespace diloco::inner
