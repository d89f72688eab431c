// Codec throughput against memcpy of the same bytes, measured in one run.
// Columns: encode and decode rate in GB/s of fp32 input (16M floats by
// default, one thread), each as a ratio to memcpy; compression ratio
// (fp32 bytes / payload bytes); RMS error relative to the input's RMS.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "diloco/compression/codec.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double best_seconds(int repeats, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

void usage() {
  std::fprintf(stderr, "usage: bench_compression [--elements N] [--repeats R] [--block B] [--topk-ratio F]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t{1} << 24;
  int repeats = 5;
  std::uint32_t block = 256;
  double ratio = 0.1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage();
    if (a == "--elements") n = std::stoull(argv[++i]);
    else if (a == "--repeats") repeats = std::stoi(argv[++i]);
    else if (a == "--block") block = static_cast<std::uint32_t>(std::stoul(argv[++i]));
    else if (a == "--topk-ratio") ratio = std::stod(argv[++i]);
    else usage();
  }
  if (n == 0 || repeats < 1) usage();

  std::vector<float> values(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1e-3f);
  for (auto& v : values) v = dist(rng);
  double rms_in = 0.0;
  for (float v : values) rms_in += double(v) * v;
  rms_in = std::sqrt(rms_in / static_cast<double>(n));

  const double bytes = static_cast<double>(n) * sizeof(float);
  std::vector<float> copy(n, 1.0f);
  const double memcpy_s = best_seconds(repeats, [&] { std::memcpy(copy.data(), values.data(), n * sizeof(float)); });
  const double memcpy_gbs = bytes / memcpy_s / 1e9;

  std::printf("# %zu floats (%.0f MB fp32), best of %d, one thread; block %u, topk ratio %.2f\n", n, bytes / 1e6,
              repeats, block, ratio);
  std::printf("%-10s %10s %8s %10s %8s %10s %12s\n", "codec", "enc GB/s", "enc/cpy", "dec GB/s", "dec/cpy", "ratio",
              "rms rel err");
  std::printf("%-10s %10.2f %8.2f %10.2f %8.2f %10.2f %12.2e\n", "memcpy", memcpy_gbs, 1.0, memcpy_gbs, 1.0, 1.0, 0.0);
  for (const auto& name : diloco::compression::codec_names()) {
    diloco::compression::CodecConfig config;
    config.name = name;
    config.block = block;
    config.topk_ratio = ratio;
    auto codec = diloco::compression::make_codec(config);
    std::vector<std::byte> payload;
    codec->encode(values, payload);  // sizes the buffer before timing
    const double enc_s = best_seconds(repeats, [&] { codec->encode(values, payload); });
    const double dec_s = best_seconds(repeats, [&] {
      if (codec->decode(payload, copy) != diloco::compression::DecodeError::kOk) std::abort();
    });
    double err = 0.0;
    for (std::size_t i = 0; i < n; ++i) err += double(copy[i] - values[i]) * (copy[i] - values[i]);
    const double rel = std::sqrt(err / static_cast<double>(n)) / rms_in;
    std::printf("%-10s %10.2f %8.2f %10.2f %8.2f %10.2f %12.2e\n", name.c_str(), bytes / enc_s / 1e9,
                memcpy_s / enc_s, bytes / dec_s / 1e9, memcpy_s / dec_s, bytes / static_cast<double>(payload.size()),
                rel);
  }
  return 0;
}
