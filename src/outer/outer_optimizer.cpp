// Nesterov and heavy-ball SGD over flat fp32 buffers; the state lives on the
// CPU whatever device trains (OpenDiLoCo keeps outer state off the GPU).
#include "outer/outer_optimizer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace diloco::outer {
namespace {

class MomentumSgd final : public OuterOptimizer {
 public:
  MomentumSgd(const OuterConfig& c, std::size_t n, bool nesterov)
      : lr_(static_cast<float>(c.lr)), momentum_(static_cast<float>(c.momentum)), nesterov_(nesterov) {
    if (momentum_ != 0.0f) buffer_.assign(n, 0.0f);
  }

  void step(std::span<float> global, std::span<const float> g) override {
    const std::size_t n = global.size();
    float* theta = global.data();
    const float* grad = g.data();
    if (buffer_.empty()) {
      for (std::size_t i = 0; i < n; ++i) theta[i] -= lr_ * grad[i];
      return;
    }
    float* buf = buffer_.data();
    // On the first step buf = g exactly, as PyTorch initializes it.
    const float m = started_ ? momentum_ : 0.0f;
    started_ = true;
    if (nesterov_) {
      for (std::size_t i = 0; i < n; ++i) {
        buf[i] = m * buf[i] + grad[i];
        theta[i] -= lr_ * (grad[i] + momentum_ * buf[i]);
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        buf[i] = m * buf[i] + grad[i];
        theta[i] -= lr_ * buf[i];
      }
    }
  }

  std::span<const float> state() const override { return buffer_; }
  bool started() const override { return started_; }

  void load_state(std::span<const float> state, bool started) override {
    if (state.size() != buffer_.size())
      throw std::invalid_argument("outer optimizer state holds " + std::to_string(state.size()) + " values, expected " +
                                  std::to_string(buffer_.size()));
    std::copy(state.begin(), state.end(), buffer_.begin());
    started_ = started;
  }

 private:
  float lr_;
  float momentum_;
  bool nesterov_;
  bool started_ = false;
  std::vector<float> buffer_;
};

}  // namespace

std::unique_ptr<OuterOptimizer> make_outer_optimizer(const OuterConfig& config, std::size_t num_params) {
  return std::make_unique<MomentumSgd>(config, num_params, config.kind == OuterKind::kNesterov);
}

}  // namespace diloco::outer
