// The decoders' attention as fused batched products.
#include "inner/models/attention.h"

#include <cmath>
#include <limits>

namespace diloco::inner {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& mask) {
  const auto B = q.size(0);
  const auto H = q.size(1);
  const auto Tq = q.size(2);
  const auto d = q.size(3);
  const auto Tk = k.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto q3 = q.reshape({B * H, Tq, d});
  const auto kt = k.reshape({B * H, Tk, d}).transpose(1, 2);
  torch::Tensor scores;
  if (mask.defined()) {
    const auto bias = torch::zeros({Tq, Tk}, q.options()).masked_fill_(mask, -std::numeric_limits<float>::infinity());
    scores = torch::baddbmm(bias, q3, kt, /*beta=*/1.0, /*alpha=*/scale);
  } else {
    scores = torch::bmm(q3, kt).mul_(scale);  // bmm's backward does not read its result
  }
  return torch::bmm(torch::softmax(scores, -1), v.reshape({B * H, Tk, d})).view({B, H, Tq, d});
}

}  // namespace diloco::inner
