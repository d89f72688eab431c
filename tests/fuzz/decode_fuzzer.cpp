// libFuzzer target: arbitrary bytes through every codec's decoder. Decoding
// must refuse or succeed with finite values only, never read or write out of
// bounds (ASan) or hit undefined behaviour (UBSan).
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  auto codec = diloco::compression::make_codec(diloco::fuzz::config_for(data[0]));
  const auto payload = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  // Decode into the count the header claims (bounded, so a huge claim cannot
  // exhaust memory), and into a count one off, which must be refused.
  std::uint64_t count = 0;
  if (payload.size() >= 16) std::memcpy(&count, payload.data() + 8, 8);
  count %= (1u << 16);
  std::vector<float> out(count, 0.0f);
  const auto result = codec->decode(payload, out);
  // A payload that decodes is safe to apply: no NaN or infinity comes out.
  if (result == diloco::compression::DecodeError::kOk)
    for (float v : out)
      if (!std::isfinite(v)) __builtin_trap();
  codec->decode_accumulate(payload, out, 0.5f);
  std::vector<float> wrong(count + 1, 0.0f);
  if (result == diloco::compression::DecodeError::kOk &&
      codec->decode(payload, wrong) == diloco::compression::DecodeError::kOk)
    __builtin_trap();
  return 0;
}
