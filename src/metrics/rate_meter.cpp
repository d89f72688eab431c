// Rates from consecutive metrics rows; the peak table for MFU on GPUs.
#include "metrics/rate_meter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace diloco::metrics {

double train_flops_per_token(double params, int layers, int d_model, int seq_len) {
  return 6.0 * params + 12.0 * layers * static_cast<double>(d_model) * seq_len;
}

double datasheet_peak_tflops(const std::string& device_name, bool bf16) {
  // Dense (no sparsity) TFLOP/s: {bf16 tensor cores, fp32 without}. The
  // longer names first: "NVIDIA L40S" holds "L40" and "L4" too.
  static const std::pair<const char*, std::pair<double, double>> kTable[] = {
      {"H200", {989.0, 67.0}}, {"H100 PCIe", {756.0, 51.0}}, {"H100", {989.0, 67.0}}, {"A100", {312.0, 19.5}},
      {"L40S", {362.0, 91.6}}, {"L40", {181.0, 90.5}},    {"A10G", {0.0, 31.2}},   {"A10", {125.0, 31.2}},
      {"L4", {121.0, 30.3}},
      {"V100", {0.0, 15.7}},   {"T4", {0.0, 8.1}},
  };  // 0: the precision has no such figure there (no bf16 tensor cores, or none we could confirm)
  for (const auto& [name, peak] : kTable)
    if (device_name.find(name) != std::string::npos) return bf16 ? peak.first : peak.second;
  return 0.0;
}

RateMeter::RateMeter(int rounds, double flops_per_token, double site_peak_flops)
    : rounds_(rounds), flops_per_token_(flops_per_token), site_peak_flops_(site_peak_flops) {}

Rates RateMeter::observe(int round, double tokens, double wall_s, double site_tokens) {
  Rates r;
  const bool known_prev = prev_round_ == round - 1 && (round == 1 || first_round_ >= 0);
  if (first_round_ < 0 && round == 1) {
    first_round_ = 0;
    first_wall_ = 0.0;
  }
  const double dt = wall_s - prev_wall_;
  if (known_prev && dt > 0.0) {
    r.tokens_per_s = (tokens - prev_tokens_) / dt;
    if (flops_per_token_ > 0.0 && site_peak_flops_ > 0.0)
      r.mfu = site_tokens * flops_per_token_ / dt / site_peak_flops_;
  }
  if (first_round_ < 0) {  // a resumed run: the pace is measured from here
    first_round_ = round;
    first_wall_ = wall_s;
  } else if (round > first_round_) {
    const double per_round = (wall_s - first_wall_) / (round - first_round_);
    r.eta_s = per_round * std::max(0, rounds_ - round);
  }
  prev_round_ = round;
  prev_tokens_ = tokens;
  prev_wall_ = wall_s;
  return r;
}

std::string human_duration(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  else std::snprintf(buf, sizeof(buf), "%llds", s);
  return buf;
}

}  // namespace diloco::metrics
