// The planner's round model (see round_model.h).
#include "plan/model/round_model.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "diloco/compression/codec.h"
#include "plan/input_error.h"

namespace diloco::plan {

std::unique_ptr<compression::Codec> plan_codec(const std::string& name, const compression::CodecConfig& settings) {
  compression::CodecConfig config = settings;
  config.name = name;
  std::string error;
  auto codec = compression::make_codec(config, &error);
  if (!codec) throw InputError("plan: codec " + name + ": " + error);
  return codec;
}

namespace {

// One exchange of `values` values with `codec` between the leaders, as the
// model gives it.
ExchangeCost modelled_exchange(const PlanInputs& in, const compression::Codec& codec, std::size_t values) {
  ExchangeShape shape;
  shape.values = values;
  shape.codec = &codec;
  shape.setting = in.exchange;
  shape.keyed = in.keyed;
  shape.part_bytes = in.part_bytes;
  return exchange_cost(in.sites, shape);
}

// The same, scaled by what the probe measured (see round_model.h).
ExchangeCost exchange(const PlanInputs& in, const compression::Codec& codec, std::size_t values) {
  ExchangeCost c = modelled_exchange(in, codec, values);
  const double factor = measured_exchange_factor(in, c.algorithm);
  c.seconds *= factor;
  c.report_seconds *= factor;
  return c;
}

std::unique_ptr<compression::Codec> codec_of(const PlanInputs& in, const std::string& name) {
  return plan_codec(name, in.codec_settings);
}

// The mean over windows of h consecutive steps of the largest of `floor` and
// the slowest site's sum (sliding windows); with fewer than 2 h steps in a
// series, the largest of `floor` and h times the slowest site's mean step.
double slowest_window(const std::vector<std::vector<double>>& sites, int H, double floor) {
  const auto h = static_cast<std::size_t>(std::max(H, 1));
  std::size_t n = std::numeric_limits<std::size_t>::max();
  double slowest_mean = 0.0;
  for (const auto& s : sites) {
    n = std::min(n, s.size());
    slowest_mean = std::max(slowest_mean, std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size()));
  }
  if (n < 2 * h) return std::max(floor, H * slowest_mean);
  std::vector<std::vector<double>> prefix;
  for (const auto& s : sites) {
    prefix.emplace_back(n + 1, 0.0);
    for (std::size_t k = 0; k < n; ++k) prefix.back()[k + 1] = prefix.back()[k] + s[k];
  }
  double total = 0.0;
  for (std::size_t k = 0; k + h <= n; ++k) {
    double slowest = floor;
    for (const auto& p : prefix) slowest = std::max(slowest, p[k + h] - p[k]);
    total += slowest;
  }
  return total / static_cast<double>(n - h + 1);
}

// The mean of f(sync_s times each of the spread's factors) (f(sync_s)
// without a spread).
template <typename F>
double over_spread(const PlanInputs& in, double sync_s, F f) {
  if (in.exchange_spread.empty()) return f(sync_s);
  double total = 0.0;
  for (double r : in.exchange_spread) total += f(sync_s * r);
  return total / static_cast<double>(in.exchange_spread.size());
}

// What a round's boundary adds (see plan_model.h): the report's control_s,
// and the vote's in the share of the spread's exchange times over `covered`
// (an overlapped exchange against the steps beside it; blocking: none).
// Unmeasured, the report gather alone, on the links as the model has them
// (the vote runs on all ranks' communicator, not between the leaders).
double boundary_s(const PlanInputs& in, double sync_s, double covered, bool overlapped) {
  if (in.control_s <= 0.0)
    return all_gather_seconds(in.sites, std::vector<double>(in.sites.size(), kRoundReportBytes));
  if (!overlapped) return in.control_s;
  const double vote = over_spread(in, sync_s, [covered](double s) { return s > covered ? 1.0 : 0.0; });
  return in.control_s * (1.0 + vote);
}

}  // namespace

MeasuredExchange measured_exchange(const PlanInputs& in) {
  MeasuredExchange m;
  if (in.probe_exchange_s <= 0.0 || in.probe_codec.empty() || in.params == 0) return m;
  const auto codec = plan_codec(in.probe_codec, in.codec_settings);
  const ExchangeCost probe = modelled_exchange(in, *codec, in.params);
  m.algorithm = probe.algorithm;
  m.modelled_s = probe.seconds;
  if (probe.seconds > 0.0) m.factor = in.probe_exchange_s / probe.seconds;
  return m;
}

double measured_exchange_factor(const PlanInputs& in, Algorithm algorithm) {
  const MeasuredExchange m = measured_exchange(in);
  return m.algorithm == algorithm ? m.factor : 1.0;
}

double round_compute_s(const PlanInputs& in, int H, double overlapped, double floor) {
  const double f = std::clamp(overlapped, 0.0, 1.0);
  // A step's expected cost when f of the steps run beside the exchange.
  const auto scale = [&](std::size_t s) {
    const double slowdown = s < in.site_overlap_slowdown.size() ? std::max(1.0, in.site_overlap_slowdown[s]) : 1.0;
    return (1.0 - f) + f * slowdown;
  };
  if (in.site_steps.empty()) {
    double worst = 1.0;
    for (std::size_t s = 0; s < in.site_overlap_slowdown.size(); ++s) worst = std::max(worst, scale(s));
    return std::max(floor, H * in.step_s * worst);
  }
  if (f == 0.0 || in.site_overlap_slowdown.empty()) return slowest_window(in.site_steps, H, floor);
  auto busy = in.site_steps;
  for (std::size_t s = 0; s < busy.size(); ++s)
    for (auto& t : busy[s]) t *= scale(s);
  return slowest_window(busy, H, floor);
}

PlanCandidate evaluate(const PlanInputs& in, const std::string& codec_name, const std::string& overlap, int H) {
  const auto codec = codec_of(in, codec_name);
  PlanCandidate c;
  c.codec = codec_name;
  c.overlap = overlap;
  c.H = H;
  // Overlapped, the steps the exchange is in flight for run slower: its
  // share of the round's steps.
  const double plain = round_compute_s(in, H);
  const auto in_flight = [plain](double sync_s) { return plain > 0.0 ? sync_s / plain : 1.0; };
  double compute = plain;
  if (overlap == "streaming") {
    c.fragments = std::max(1, std::min({in.fragments, in.layers, H}));
    c.tau = std::max(1, std::min(H / c.fragments, 5));
    const auto one = exchange(in, *codec, (in.params + c.fragments - 1) / c.fragments);
    c.ring = one.algorithm == Algorithm::kRing;
    c.sync_s = c.fragments * one.seconds;
    compute = round_compute_s(in, H, in_flight(c.sync_s));
    const double covered = c.tau * compute / H;
    c.exposed_s = c.fragments * over_spread(in, one.seconds, [&](double s) {
      return std::max(0.0, s - covered);
    }) + boundary_s(in, one.seconds, covered, true);
    c.bytes_per_round = c.fragments * one.bytes;
  } else {
    const auto whole = exchange(in, *codec, in.params);
    c.ring = whole.algorithm == Algorithm::kRing;
    c.sync_s = whole.seconds;
    if (overlap == "delayed") {
      // A round ends when both its steps and the exchange beside them have:
      // the mean over windows and exchange times of the larger of the two.
      const double f = in_flight(c.sync_s);
      compute = round_compute_s(in, H, f);
      c.exposed_s = over_spread(in, c.sync_s, [&](double s) { return round_compute_s(in, H, f, s); }) -
                    compute + boundary_s(in, c.sync_s, compute, true);
    } else {
      c.exposed_s = whole.seconds + boundary_s(in, c.sync_s, 0.0, false);
    }
    c.bytes_per_round = whole.bytes;
  }
  c.round_s = compute + c.exposed_s;
  c.utilization = c.round_s > 0.0 ? compute / c.round_s : 1.0;
  const double tokens = H * in.tokens_per_step;
  c.bytes_per_billion_tokens = tokens > 0.0 ? c.bytes_per_round / tokens * 1e9 : 0.0;
  return c;
}

}  // namespace diloco::plan
