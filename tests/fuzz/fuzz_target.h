// How a fuzz input maps to a decode call: byte 0 picks the codec and block
// size, the rest is the payload. Shared by the fuzzer and the seed writer.
#pragma once

#include <cstdint>

#include "diloco/compression/codec.h"

namespace diloco::fuzz {

inline compression::CodecConfig config_for(std::uint8_t selector) {
  const auto names = compression::codec_names();
  compression::CodecConfig c;
  c.name = names[selector % names.size()];
  c.block = (selector & 0x80) ? 64 : 256;
  c.topk_ratio = 0.1;
  return c;
}

}  // namespace diloco::fuzz
