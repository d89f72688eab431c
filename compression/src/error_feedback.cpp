// Error feedback: compensate, encode, decode our own payload, keep the rest.
#include "diloco/compression/error_feedback.h"

#include <cstdint>

#include "codec_util.h"

namespace diloco::compression {
namespace {

// True when every values[i] + decay * residual[i] is finite: a branch-free
// reduction on the bits, so it vectorizes (an early exit per element does not).
DILOCO_CLONES bool compensated_finite(const float* values, const float* residual, float decay, std::size_t n) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    bad |= static_cast<std::uint32_t>((detail::float_bits(values[i] + decay * residual[i]) & 0x7F800000u) == 0x7F800000u);
  return bad == 0;
}

}  // namespace

EncodeError ErrorFeedback::encode(const Codec& codec, std::span<const float> values, std::vector<std::byte>& payload,
                                  std::span<float> transmitted, std::uint64_t seed) {
  const std::size_t n = values.size();
  // The corrected values are built in the residual's own memory (no second
  // buffer of the model's size), so first make sure they will encode.
  if (!compensated_finite(values.data(), residual_.data(), decay_, n)) return EncodeError::kNonFiniteInput;
  for (std::size_t i = 0; i < n; ++i) residual_[i] = values[i] + decay_ * residual_[i];
  if (EncodeError e = codec.encode(residual_, payload, seed); e != EncodeError::kOk) return e;
  // Our own payload always decodes; a failure here is a codec bug. `values`
  // is not read again, so `transmitted` may be its memory.
  if (codec.decode(payload, transmitted) != DecodeError::kOk) return EncodeError::kNonFiniteInput;
  for (std::size_t i = 0; i < n; ++i) residual_[i] -= transmitted[i];
  return EncodeError::kOk;
}

}  // namespace diloco::compression
