// The planner's model of a round (no torch, no MPI): from each site
// leader's link, the parameter count and the slowest step time, the time,
// exposed communication, utilization and bytes of each candidate (codec,
// overlap mode, H).
//
// Exchange: exchange_cost.h, with the recipe's compression.exchange, key and
// part size: a report gather, then all-gather (every site's payload n - 1
// times over its own uplink) or the ring (n - 1 hops of a 1/n chunk, then an
// all-gather of the reduced chunks).
// Overlap: blocking exposes the whole exchange; delayed runs a round's
// exchange during the next round's H steps (exposed: what H steps do not
// cover, round by round: the mean over windows of H steps and over the
// exchange's measured spread of the larger of the exchange and the window,
// less the mean window); streaming syncs F fragments of about P/F values in
// turn, each overlapping tau steps (exposed: F times what tau steps do not
// cover, over the spread alike). An exchange's time varies from round to
// round (a training run's exchanges over shaped links ranged 0.8 to 1.25
// times their mean), and a round waits for the longer of steps and exchange: with
// the two close, a fixed exchange time would hide that wait. The spread is
// the probe's exchange times over their mean (the model's time is kept as
// the mean: the spread only says how far each round strays from it). The
// probe times the recipe's codec; its spread and control time are applied
// to every codec's candidates alike (both come from the links' queues, which
// any exchange that fills them builds; a codec left out would look better
// for being unmeasured).
// Measured exchange: the probe's exchanges ran over the same links with the
// steps running. Where the model's exchange uses the algorithm the probe's
// did, its time is scaled by the probe's time (the largest of the leaders'
// mean exchange times) over what the model gives for the probe's exchange
// (probe_codec, every parameter). The links' rates are
// measured a pair at a time; an all-gather loads every site's uplink and
// downlink at once, and TCP then falls short of them (each direction's
// acknowledgements queue behind the other's data: on 100/50/20/10 Mbit/s
// sites an int4 all-gather took 1.44x the model's time).
// Round boundary: the stop vote and the report gather are small messages
// that wait behind an exchange's data on the links; the probe times one such
// all-reduce (control_s). Blocking, a round adds it once, for the report.
// Delayed, the vote and the report run while the round's exchange is on the
// links: a round lasts the larger of its steps plus the report and the
// exchange (an exchange that outlasts them hides both: on 100/50/20/10
// Mbit/s sites a round took 0.969 s against its slowest leader's 0.975 s
// exchange). Streaming, the last fragment's exchange ends within the round:
// the report, and the vote once more in the share of rounds whose fragment
// exchange outlasts the steps beside it (over the spread).
// Without that measure, the report gather on the model's links stands for it.
// Compute: a round lasts as long as its slowest site's H steps, and which
// site is slowest changes from round to round where ranks share cores or
// links, so a round's compute is the mean over windows of H consecutive
// steps of the largest site's sum (the sites' step series, timed while all
// stepped at once), not H times the slowest mean step, which it exceeds.
// With fewer than 2 H steps in a series, H times the slowest site's mean;
// without series, H times step_s. Overlapped (delayed, streaming), the share
// of the round's steps the exchange is in flight for (its time over the
// compute's, at most 1) runs each site's steps times its leader's overlap
// slowdown (plan --cluster: the mean measured on the leader's host; values
// under 1 are noise and count as 1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diloco/compression/codec.h"
#include "plan/model/exchange_cost.h"

namespace diloco::plan {

struct PlanInputs {
  std::vector<SiteLink> sites;        // each site leader's link
  AlgorithmSetting exchange = AlgorithmSetting::kAuto;  // compression.exchange
  bool keyed = false;                 // security.key_file: every message carries a tag
  std::size_t part_bytes = std::size_t{8} << 20;       // the all-gather's part size (the exchange's default)
  std::size_t params = 0;
  double step_s = 0.0;                // the slowest rank's inner step
  // Per site, its step times in order (a step of a site: its slowest rank's);
  // empty when not measured.
  std::vector<std::vector<double>> site_steps;
  // Per site, the host whose cores it shares with other sites' ranks beyond
  // their number (an index; -1: none, or not known), and its ranks. Sites
  // on one such host take turns on its cores, and one that ends its steps
  // first gives its share to the others: together their steps take what
  // the host's cores can do, not the slowest one's pace (round_compute_s).
  // Empty: none shares.
  std::vector<int> site_shared_host;
  std::vector<int> site_ranks;
  std::vector<double> site_overlap_slowdown;  // per site, its leader's; empty: not measured (1)
  // Exchange times over their mean (mean 1); empty: not measured (always 1).
  std::vector<double> exchange_spread;
  // A small collective's time right behind an exchange (0: not measured):
  // what the round's report gather pays after the exchange (blocking) or
  // behind the one just launched (overlapped), and the stop vote where an
  // overlapped exchange is still in flight when the steps end.
  double control_s = 0.0;
  // The probe's exchanges: their time (s, the largest of the leaders' mean
  // exchange times; 0: not measured) and the codec they ran with.
  double probe_exchange_s = 0.0;
  std::string probe_codec;
  double tokens_per_step = 0.0;       // all sites together
  compression::CodecConfig codec_settings;  // the recipe's block, top-k ratio and bits (name aside)
  int h_min = 1, h_max = 100000;
  int fragments = 2;                  // streaming candidates
  int layers = 1;                     // fragments are whole layers: at most this many
};

struct PlanCandidate {
  std::string codec;
  std::string overlap;  // "none", "delayed", "streaming"
  int H = 1;
  int fragments = 1;
  int tau = 0;
  bool ring = false;
  double sync_s = 0.0;     // one whole exchange (streaming: all fragments' together)
  double exposed_s = 0.0;  // of it, what the round waits for
  double round_s = 0.0;
  double utilization = 0.0;
  double bytes_per_round = 0.0;  // all site leaders together
  double bytes_per_billion_tokens = 0.0;
};

// The codec `name` with the recipe's other codec settings, as the planner
// sizes payloads with it (the plan's time and memory models alike); throws
// InputError naming it.
std::unique_ptr<compression::Codec> plan_codec(const std::string& name, const compression::CodecConfig& settings);

// The compute of a round of H steps, `overlapped` (0..1) of them with an
// exchange in flight (see above); with `floor`, the mean over windows of the
// larger of floor and the window's compute (a delayed round: its steps or
// the exchange beside them, whichever ends later).
double round_compute_s(const PlanInputs& in, int H, double overlapped = 0.0, double floor = 0.0);

// The probe's exchange as the model gives it (probe_codec, every
// parameter) and probe_exchange_s over that; factor 1 when not measured.
struct MeasuredExchange {
  Algorithm algorithm = Algorithm::kAllGather;
  double modelled_s = 0.0;
  double factor = 1.0;
};
MeasuredExchange measured_exchange(const PlanInputs& in);

// What the model's exchange time is multiplied by for `algorithm`: the
// measured factor when the probe ran that algorithm, else 1.
double measured_exchange_factor(const PlanInputs& in, Algorithm algorithm);

// One candidate's numbers.
PlanCandidate evaluate(const PlanInputs& in, const std::string& codec, const std::string& overlap, int H);

}  // namespace diloco::plan
