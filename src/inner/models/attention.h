// The attention of the decoders (GPT, Llama): softmax(q kᵀ / sqrt(d) + mask) v.
#pragma once

#include <torch/torch.h>

namespace diloco::inner {

// q [B, H, Tq, d], k and v [B, H, Tk, d] (as many key/value heads as query
// heads); `mask` [Tq, Tk] is true where a key is hidden from its query, or
// undefined. Returns [B, H, Tq, d].
//
// Written as libtorch's fused batched products: the scale and the mask enter
// one baddbmm (alpha = 1/sqrt(d), the mask added as -inf), where the plain
// form (matmul, divide, masked_fill) makes two more passes over the scores
// forward and two backward. The scores differ from the plain form's only in
// the rounding of the scale (a product by 1/sqrt(d), not a division).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& mask);

}  // namespace diloco::inner
