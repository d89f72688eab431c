// Outer optimizers: apply the averaged pseudo-gradient to the global params.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace diloco::outer {

enum class OuterKind {
  kNesterov,  // DiLoCo's choice: lr 0.7, momentum 0.9 (Douillard et al. 2023)
  kSgd,       // heavy-ball SGD; lr 1 and momentum 0 is plain parameter averaging
};

struct OuterConfig {
  int rounds = 10;
  OuterKind kind = OuterKind::kNesterov;
  double lr = 0.7;
  double momentum = 0.9;
};

class OuterOptimizer {
 public:
  virtual ~OuterOptimizer() = default;
  // global -= update(pseudo_gradient); both spans have the parameter count.
  virtual void step(std::span<float> global, std::span<const float> pseudo_gradient) = 0;
  // Optimizer state (momentum buffer), empty when it keeps none.
  virtual std::span<const float> state() const = 0;
  // Whether a step has been taken (the first step initializes the momentum).
  virtual bool started() const = 0;
  // Restores what state() and started() returned; throws std::invalid_argument
  // when the size does not match.
  virtual void load_state(std::span<const float> state, bool started) = 0;
};

// Momentum follows PyTorch's SGD: buf = m*buf + g (buf = g on the first step);
// Nesterov steps along g + m*buf, heavy-ball along buf.
std::unique_ptr<OuterOptimizer> make_outer_optimizer(const OuterConfig& config, std::size_t num_params);

}  // namespace diloco::outer
