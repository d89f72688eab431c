// Keys and values of the positions a decoder has seen, kept between calls so
// that sampling one more token costs one position, not the whole sequence.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace diloco::inner {

struct KvCache {
  // One entry per layer: [B, kv_heads, capacity, head_dim], allocated by the
  // first call that writes it.
  std::vector<torch::Tensor> keys, values;
  std::int64_t length = 0;    // positions held
  std::int64_t capacity = 0;  // positions the buffers hold (the model's context)

  // Writes `k` and `v` ([B, heads, T, head_dim]) at position `length` of layer
  // `layer` and returns the layer's keys and values through them.
  std::pair<torch::Tensor, torch::Tensor> append(std::size_t layer, const torch::Tensor& k, const torch::Tensor& v) {
    if (keys.size() <= layer) {
      keys.resize(layer + 1);
      values.resize(layer + 1);
    }
    if (!keys[layer].defined()) {
      keys[layer] = torch::empty({k.size(0), k.size(1), capacity, k.size(3)}, k.options());
      values[layer] = torch::empty({v.size(0), v.size(1), capacity, v.size(3)}, v.options());
    }
    const auto T = k.size(2);
    keys[layer].narrow(2, length, T).copy_(k);
    values[layer].narrow(2, length, T).copy_(v);
    return {keys[layer].narrow(2, 0, length + T), values[layer].narrow(2, 0, length + T)};
  }
  void clear() {
    keys.clear();
    values.clear();
    length = 0;
  }
};

// The causal mask of `T` new queries after `past` cached positions: true
// where a key lies after its query. Undefined when nothing is masked (T = 1).
inline torch::Tensor causal_mask(std::int64_t past, std::int64_t T, const torch::Device& device) {
  if (T == 1) return {};
  return torch::ones({T, past + T}, torch::TensorOptions().dtype(torch::kBool).device(device)).triu(past + 1);
}

}  // namespace diloco::inner
