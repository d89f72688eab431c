// Error feedback: compensate, encode, decode our own payload, keep the rest.
#include "diloco/compression/error_feedback.h"

#include <cmath>

namespace diloco::compression {

EncodeError ErrorFeedback::encode(const Codec& codec, std::span<const float> values, std::vector<std::byte>& payload,
                                  std::span<float> transmitted, std::uint64_t seed) {
  const std::size_t n = values.size();
  // The corrected values are built in the residual's own memory (no second
  // buffer of the model's size), so first make sure they will encode.
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i] + decay_ * residual_[i])) return EncodeError::kNonFiniteInput;
  for (std::size_t i = 0; i < n; ++i) residual_[i] = values[i] + decay_ * residual_[i];
  if (EncodeError e = codec.encode(residual_, payload, seed); e != EncodeError::kOk) return e;
  // Our own payload always decodes; a failure here is a codec bug. `values`
  // is not read again, so `transmitted` may be its memory.
  if (codec.decode(payload, transmitted) != DecodeError::kOk) return EncodeError::kNonFiniteInput;
  for (std::size_t i = 0; i < n; ++i) residual_[i] -= transmitted[i];
  return EncodeError::kOk;
}

}  // namespace diloco::compression
