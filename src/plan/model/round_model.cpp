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

// The host whose cores site s shares with more ranks than they number, or -1.
int shared_host(const PlanInputs& in, std::size_t s) {
  return s < in.site_shared_host.size() ? in.site_shared_host[s] : -1;
}

// How long the sites' steps of one window take, from each site's time for
// them (`spans`): the slowest site's; sites sharing a host's cores beyond
// their number finish together in what the host can do instead: with n_s
// ranks each, sum n_s / sum (n_s / span_s) (a site whose span is longer had
// a smaller share of the cores; one that finishes first hands its share on,
// so the host's work is done at its full rate). At least `floor`.
double window_s(const PlanInputs& in, const std::vector<double>& spans, double floor) {
  double slowest = floor;
  std::vector<std::pair<double, double>> shared;  // per shared host: ranks, ranks over span
  for (std::size_t s = 0; s < spans.size(); ++s) {
    const int host = shared_host(in, s);
    if (host < 0 || spans[s] <= 0.0) {
      slowest = std::max(slowest, spans[s]);
      continue;
    }
    if (shared.size() <= static_cast<std::size_t>(host)) shared.resize(static_cast<std::size_t>(host) + 1);
    const double n = s < in.site_ranks.size() ? std::max(1, in.site_ranks[s]) : 1;
    shared[static_cast<std::size_t>(host)].first += n;
    shared[static_cast<std::size_t>(host)].second += n / spans[s];
  }
  for (const auto& [ranks, rate] : shared)
    if (rate > 0.0) slowest = std::max(slowest, ranks / rate);
  return slowest;
}

// The mean over windows of h consecutive steps of window_s of the sites'
// sums (sliding windows; with fewer than 2 h steps in a series, h times each
// site's mean step). Sites sharing a host's cores take h times their mean
// step, at the host's rate, whatever the round's length: the probe's series
// come from ranks stepping side by side without a pause, where the kernel
// leaves two ranks on one core and one alone for stretches of a second (8
// steps of a series vary by 20% around their mean), while a round's
// exchange puts them to sleep and wakes them every round, so a round's
// steps are shared more evenly, and the sites that finish hand their cores
// on (3 ranks on 2 cores, H 8: the slowest site's mean step 1.05 times the
// host's rate over the rounds, 1.04 to 1.08; 4 ranks: 1.00; the slowest
// windows of the series: 1.23 and 1.11).
double slowest_window(const PlanInputs& in, const std::vector<std::vector<double>>& sites, int H, double floor) {
  const auto h = static_cast<std::size_t>(std::max(H, 1));
  std::size_t n = std::numeric_limits<std::size_t>::max();
  std::vector<double> spans;
  for (std::size_t s = 0; s < sites.size(); ++s) {
    if (shared_host(in, s) < 0) n = std::min(n, sites[s].size());
    spans.push_back(H * std::accumulate(sites[s].begin(), sites[s].end(), 0.0) /
                    static_cast<double>(sites[s].size()));
  }
  if (n == std::numeric_limits<std::size_t>::max() || n < 2 * h) return window_s(in, spans, floor);
  std::vector<std::vector<double>> prefix(sites.size());
  for (std::size_t s = 0; s < sites.size(); ++s) {
    if (shared_host(in, s) >= 0) continue;
    prefix[s].assign(n + 1, 0.0);
    for (std::size_t k = 0; k < n; ++k) prefix[s][k + 1] = prefix[s][k] + sites[s][k];
  }
  double total = 0.0;
  for (std::size_t k = 0; k + h <= n; ++k) {
    for (std::size_t s = 0; s < prefix.size(); ++s)
      if (!prefix[s].empty()) spans[s] = prefix[s][k + h] - prefix[s][k];
    total += window_s(in, spans, floor);
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

// A round's report (see round_model.h): the probe's control_s, unmeasured
// the report gather on the links as the model has them.
double report_s(const PlanInputs& in) {
  if (in.control_s > 0.0) return in.control_s;
  return all_gather_seconds(in.sites, std::vector<double>(in.sites.size(), kRoundReportBytes));
}

// Streaming's boundary: the report, and the vote in the share of the
// spread's exchange times over `covered` (the last fragment's exchange is
// still on the links when the steps end; the vote runs on all ranks'
// communicator, so it is only measured, never modelled).
double streaming_boundary_s(const PlanInputs& in, double sync_s, double covered) {
  if (in.control_s <= 0.0) return report_s(in);
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
  if (f == 0.0 || in.site_overlap_slowdown.empty()) return slowest_window(in, in.site_steps, H, floor);
  auto busy = in.site_steps;
  for (std::size_t s = 0; s < busy.size(); ++s)
    for (auto& t : busy[s]) t *= scale(s);
  return slowest_window(in, busy, H, floor);
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
    }) + streaming_boundary_s(in, one.seconds, covered);
    c.bytes_per_round = c.fragments * one.bytes;
  } else {
    const auto whole = exchange(in, *codec, in.params);
    c.ring = whole.algorithm == Algorithm::kRing;
    c.sync_s = whole.seconds;
    if (overlap == "delayed") {
      // A round ends when both its steps and report and the exchange
      // beside them have: the mean over windows and exchange times of the
      // larger of the two. The vote and the report run while the exchange
      // is on the links, so an exchange that outlasts them hides them.
      const double f = in_flight(c.sync_s), report = report_s(in);
      compute = round_compute_s(in, H, f);
      c.exposed_s = over_spread(in, c.sync_s, [&](double s) { return round_compute_s(in, H, f, s - report); }) +
                    report - compute;
    } else {
      c.exposed_s = whole.seconds + report_s(in);
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
