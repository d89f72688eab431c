// Balanced contiguous split of layers into fragments.
#include "outer/fragments.h"

#include <cmath>

namespace diloco::outer {

std::vector<Fragment> split_fragments(const std::vector<LayerSpan>& layers, int fragments) {
  if (fragments < 1) throw std::invalid_argument("sync.fragments must be at least 1");
  if (static_cast<std::size_t>(fragments) > layers.size())
    throw std::invalid_argument("sync.fragments = " + std::to_string(fragments) + " but the model has only " +
                                std::to_string(layers.size()) + " layers to split");
  std::size_t total = 0;
  for (const auto& l : layers) total += l.count;
  std::vector<Fragment> out;
  std::size_t next = 0;  // first layer not yet assigned
  std::size_t done = 0;  // parameters assigned so far
  for (int f = 0; f < fragments; ++f) {
    const std::size_t layers_left_after = static_cast<std::size_t>(fragments - f - 1);
    const double target = static_cast<double>(total) * (f + 1) / fragments;
    Fragment frag;
    frag.offset = layers[next].offset;
    frag.first_layer = layers[next].name;
    // Take at least one layer; keep one for each later fragment; otherwise
    // stop where the running total lands nearest the target.
    std::size_t end = next + 1;
    std::size_t sum = done + layers[next].count;
    while (end + layers_left_after < layers.size()) {
      const std::size_t with_next = sum + layers[end].count;
      if (std::abs(static_cast<double>(with_next) - target) >= std::abs(static_cast<double>(sum) - target) &&
          f + 1 < fragments)
        break;
      sum = with_next;
      ++end;
    }
    frag.count = sum - done;
    frag.last_layer = layers[end - 1].name;
    out.push_back(frag);
    done = sum;
    next = end;
  }
  return out;
}

}  // namespace diloco::outer
