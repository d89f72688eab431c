// Streaming DiLoCo's fragments (Douillard et al. 2025): the parameters split
// into contiguous groups of whole layers of about equal size, each synced on
// its own schedule so only one fragment's exchange is in flight at a time.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace diloco::outer {

struct Fragment {
  std::size_t offset = 0;  // first parameter
  std::size_t count = 0;
  std::string first_layer, last_layer;
};

struct LayerSpan {
  std::string name;
  std::size_t offset = 0;
  std::size_t count = 0;
};

// Splits `layers` (contiguous, in order) into `fragments` groups, each closing
// at the layer boundary nearest its equal share of the parameters. Throws
// std::invalid_argument when there are fewer layers than fragments.
std::vector<Fragment> split_fragments(const std::vector<LayerSpan>& layers, int fragments);

// The inner step (counted from the round's start) after which fragment f's
// exchange starts, for H steps per round and overlap tau: fragment f
// completes at floor((f+1) H / F) and starts tau steps earlier, so with
// tau <= floor(H / F) one fragment is in flight at a time and all complete
// by the round's end. With F = 1 and tau = 0 this is blocking DiLoCo.
inline int fragment_start_step(int f, int fragments, int H, int tau) {
  return static_cast<int>(static_cast<long long>(f + 1) * H / fragments) - tau;
}

}  // namespace diloco::outer
