// AdamW's update of one contiguous fp32 tensor on the CPU in a single pass
// (libtorch's step makes about nine passes over the parameter's memory).
// torch::optim::AdamW's formula, its operations in the same order and its
// scalars rounded to float as libtorch's kernels take them; the results
// agree with PyTorch's AdamW to a few float ulps (tests/inner/muon_reference.py).
#pragma once

#include <cstddef>

namespace diloco::inner {

struct AdamWScalars {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double bias_correction1 = 1.0;  // 1 - beta1^step
  double bias_correction2 = 1.0;  // 1 - beta2^step
};

// param *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g²;
// param -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
void fused_adamw(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                 const AdamWScalars& s);

}  // namespace diloco::inner
