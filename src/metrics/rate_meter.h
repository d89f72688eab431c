// What the round line and the metrics add to a round's own figures: tokens
// per second, model FLOPs utilization where both the model's FLOPs and the
// device's peak are known, and the time left.
#pragma once

#include <optional>
#include <string>

namespace diloco::metrics {

// Training FLOPs per token of a decoder-only transformer: 6N for the
// forward and backward pass through every weight, plus 12·L·d·T for
// attention's scores and weighted sums (the count of the PaLM paper,
// appendix B, which MFU is defined by).
double train_flops_per_token(double params, int layers, int d_model, int seq_len);

// Dense peak TFLOP/s of a GPU whose name contains a known model (H100, A100,
// L40S, ...), bf16 on tensor cores or fp32 without, from the vendors' data
// sheets; 0 for a name not in the table.
double datasheet_peak_tflops(const std::string& device_name, bool bf16);

struct Rates {
  std::optional<double> tokens_per_s;  // all sites, over this round
  std::optional<double> mfu;           // this site, over this round (0..1)
  std::optional<double> eta_s;         // until the last round, at the mean pace so far
};

class RateMeter {
 public:
  // `flops_per_token` and `site_peak_flops` (the peak of one device times
  // the site's ranks, in FLOP/s) are 0 when unknown: no MFU then.
  RateMeter(int rounds, double flops_per_token, double site_peak_flops);

  // A round's cumulative tokens of all sites and wall seconds (as in the
  // metrics row), and the tokens this site trained in it. A run resumed
  // after round 1 has no rates for its first round (its previous round
  // belongs to the earlier process).
  Rates observe(int round, double tokens, double wall_s, double site_tokens);

 private:
  int rounds_;
  double flops_per_token_;
  double site_peak_flops_;
  int prev_round_ = 0;
  double prev_tokens_ = 0.0;
  double prev_wall_ = 0.0;
  int first_round_ = -1;  // the round before the first measured one
  double first_wall_ = 0.0;
};

// "1h02m", "3m05s", "12s".
std::string human_duration(double seconds);

}  // namespace diloco::metrics
