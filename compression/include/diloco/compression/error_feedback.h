// Error feedback (SparseLoCo / DeMo style): a site keeps what its codec did not
// transmit and adds it to its next pseudo-gradient, so lossy codecs stay
// unbiased over rounds.
#pragma once

#include <span>
#include <vector>

#include "diloco/compression/codec.h"

namespace diloco::compression {

class ErrorFeedback {
 public:
  // `decay` scales the residual carried into each round (SparseLoCo decays
  // it); 1 keeps it whole, so the sum sent tracks the sum of the inputs.
  explicit ErrorFeedback(std::size_t count, float decay = 1.0f) : residual_(count, 0.0f), decay_(decay) {}

  // Encodes values + decay * residual into `payload`; `transmitted` receives
  // exactly what a receiver decodes from it, and the residual becomes
  // (values + decay * residual) - transmitted. `transmitted` may be the
  // memory of `values`. On an encode error nothing changes.
  EncodeError encode(const Codec& codec, std::span<const float> values, std::vector<std::byte>& payload,
                     std::span<float> transmitted, std::uint64_t seed);

  std::span<const float> residual() const { return residual_; }
  // Restores a saved residual of the same length.
  void set_residual(std::span<const float> residual) { residual_.assign(residual.begin(), residual.end()); }

 private:
  std::vector<float> residual_;
  float decay_;
};

}  // namespace diloco::compression
