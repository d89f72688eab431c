// Error feedback: compensate, encode, decode our own payload, keep the rest.
#include "diloco/compression/error_feedback.h"

namespace diloco::compression {

EncodeError ErrorFeedback::encode(const Codec& codec, std::span<const float> values, std::vector<std::byte>& payload,
                                  std::span<float> transmitted, std::uint64_t seed) {
  const std::size_t n = values.size();
  corrected_.resize(n);
  for (std::size_t i = 0; i < n; ++i) corrected_[i] = values[i] + decay_ * residual_[i];
  if (EncodeError e = codec.encode(corrected_, payload, seed); e != EncodeError::kOk) return e;
  // Our own payload always decodes; a failure here is a codec bug.
  if (codec.decode(payload, transmitted) != DecodeError::kOk) return EncodeError::kNonFiniteInput;
  for (std::size_t i = 0; i < n; ++i) residual_[i] = corrected_[i] - transmitted[i];
  return EncodeError::kOk;
}

}  // namespace diloco::compression
