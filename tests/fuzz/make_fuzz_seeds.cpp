// Writes the fuzzer's seed corpus: one valid payload per codec and block
// size, at a few lengths, into the folder given as the only argument.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "diloco/compression/crc32c.h"
#include "diloco/compression/wire_format.h"
#include "fuzz_target.h"

namespace {
constexpr std::size_t kHeader = diloco::compression::kWireHeaderSize;
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds DIR\n");
    return 2;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int written = 0;
  const auto codecs = diloco::compression::codec_names().size();
  // One selector per codec and block size: 0..codecs-1 (block 256), 0x80.. (block 64).
  for (unsigned selector = 0; selector < 256; ++selector) {
    if ((selector & 0x7F) >= codecs) continue;
    auto codec = diloco::compression::make_codec(diloco::fuzz::config_for(static_cast<std::uint8_t>(selector)));
    for (std::size_t n : {0u, 1u, 5u, 100u, 300u}) {
      std::vector<float> values(n);
      for (auto& v : values) v = dist(rng);
      std::vector<std::byte> payload;
      codec->encode(values, payload, selector);
      std::ofstream out(std::string(argv[1]) + "/seed_" + std::to_string(selector) + "_" + std::to_string(n),
                        std::ios::binary);
      const char sel = static_cast<char>(selector);
      out.write(&sel, 1);
      out.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
      ++written;
      // The element codecs' payload with its first value made NaN (all bits
      // set) and the checksum fixed: decoders must refuse it.
      const std::size_t width = codec->name() == "none" ? 4 : 2;
      if (n == 0 || (codec->name() != "none" && codec->name() != "fp16" && codec->name() != "bf16")) continue;
      auto nan = payload;
      std::fill(nan.begin() + kHeader, nan.begin() + kHeader + width, std::byte{0xFF});
      const std::uint32_t crc = diloco::compression::crc32c(std::span<const std::byte>(nan).subspan(kHeader));
      std::memcpy(nan.data() + 28, &crc, 4);
      std::ofstream bad(std::string(argv[1]) + "/nan_" + std::to_string(selector) + "_" + std::to_string(n),
                        std::ios::binary);
      bad.write(&sel, 1);
      bad.write(reinterpret_cast<const char*>(nan.data()), static_cast<std::streamsize>(nan.size()));
      ++written;
    }
  }
  std::printf("%d seeds written to %s\n", written, argv[1]);
  return 0;
}
