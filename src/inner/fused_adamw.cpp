// The single-pass AdamW update (no torch: a loop the compiler vectorizes).
#include "inner/fused_adamw.h"

#include <cmath>

namespace diloco::inner {

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx2", "default")))
#endif
void fused_adamw(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                 const AdamWScalars& s) {
  // Each scalar rounded to float as libtorch's CPU kernels take it.
  const float decay = static_cast<float>(1.0 - s.lr * s.weight_decay);
  const float b1 = static_cast<float>(s.beta1);
  const float one_minus_b1 = static_cast<float>(1.0 - s.beta1);
  const float b2 = static_cast<float>(s.beta2);
  const float one_minus_b2 = static_cast<float>(1.0 - s.beta2);
  const float bc2_sqrt = static_cast<float>(std::sqrt(s.bias_correction2));
  const float eps = static_cast<float>(s.eps);
  const float step = static_cast<float>(-(s.lr / s.bias_correction1));
  const bool decays = s.weight_decay != 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    float p = decays ? param[i] * decay : param[i];
    const float m = exp_avg[i] * b1 + g * one_minus_b1;
    const float v = exp_avg_sq[i] * b2 + one_minus_b2 * g * g;
    const float denom = std::sqrt(v) / bc2_sqrt + eps;
    p += step * (m / denom);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace diloco::inner
