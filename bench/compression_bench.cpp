// Codec throughput against memcpy of the same bytes, measured in one run.
// Columns: encode and decode rate in GB/s of fp32 input (16M floats by
// default, one thread), each as a ratio to memcpy; compression ratio
// (fp32 bytes / payload bytes); RMS error relative to the input's RMS; the
// memcpy rate each row's ratios are taken against.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "diloco/compression/codec.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double seconds(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
  const auto copy_once = [&] { std::memcpy(copy.data(), values.data(), n * sizeof(float)); };

  // memcpy's rate on this machine moves between runs (other load, memory
  // clocks), so each codec's row has its own memcpy baseline, timed in
  // alternation with its encode and decode: the ratios compare rates taken
  // under the same conditions.
  std::printf("# %zu floats (%.0f MB fp32), best of %d, one thread; block %u, topk ratio %.2f;"
              " memcpy timed alternately with each codec\n",
              n, bytes / 1e6, repeats, block, ratio);
  std::printf("%-16s %10s %8s %10s %8s %10s %12s %10s\n", "codec", "enc GB/s", "enc/cpy", "dec GB/s", "dec/cpy",
              "ratio", "rms rel err", "cpy GB/s");
  // Every codec at the common settings, then chunk-topk at SparseLoCo's
  // (chunks of 4096, 1/64 of each kept, 2 and 4 bits).
  std::vector<std::pair<std::string, diloco::compression::CodecConfig>> rows;
  for (const auto& name : diloco::compression::codec_names()) {
    diloco::compression::CodecConfig config;
    config.name = name;
    config.block = block;
    config.topk_ratio = ratio;
    rows.emplace_back(name, config);
  }
  for (const unsigned bits : {2u, 4u}) {
    diloco::compression::CodecConfig config;
    config.name = "chunk-topk";
    config.block = 4096;
    config.topk_ratio = 1.0 / 64;
    config.value_bits = bits;
    rows.emplace_back("chunk-topk/" + std::to_string(bits) + "b/64", config);
  }
  for (const auto& [name, config] : rows) {
    auto codec = diloco::compression::make_codec(config);
    std::vector<std::byte> payload;
    codec->encode(values, payload);  // sizes the buffer before timing
    double copy_s = 1e30, enc_s = 1e30, dec_s = 1e30;
    for (int r = 0; r < repeats; ++r) {
      copy_s = std::min(copy_s, seconds(copy_once));
      enc_s = std::min(enc_s, seconds([&] { codec->encode(values, payload); }));
      copy_s = std::min(copy_s, seconds(copy_once));
      dec_s = std::min(dec_s, seconds([&] {
        if (codec->decode(payload, copy) != diloco::compression::DecodeError::kOk) std::abort();
      }));
    }
    double err = 0.0;
    for (std::size_t i = 0; i < n; ++i) err += double(copy[i] - values[i]) * (copy[i] - values[i]);
    const double rel = std::sqrt(err / static_cast<double>(n)) / rms_in;
    std::printf("%-16s %10.2f %8.2f %10.2f %8.2f %10.2f %12.2e %10.2f\n", name.c_str(), bytes / enc_s / 1e9,
                copy_s / enc_s, bytes / dec_s / 1e9, copy_s / dec_s, bytes / static_cast<double>(payload.size()), rel,
                bytes / copy_s / 1e9);
  }
  return 0;
}
