// Writes the fuzzer's seed corpus: one valid payload per codec and block
// size, at a few lengths, into the folder given as the only argument.
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fuzz_target.h"

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
    }
  }
  std::printf("%d seeds written to %s\n", written, argv[1]);
  return 0;
}
