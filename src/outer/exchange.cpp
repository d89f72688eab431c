// Pseudo-gradient exchange: weights first (so unusable sites drop out on every
// leader alike), then the payloads by all-gather or ring.
#include "outer/exchange.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <string>

#include "comm/shifted_gather.h"
#include "outer/clock.h"
#include "outer/pseudo_gradient.h"
#include "plan/model/exchange_cost.h"

namespace diloco::outer {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Chunk c of n over `count` elements, as [begin, end).
std::pair<std::size_t, std::size_t> chunk(std::size_t count, int n, int c) {
  return {count * static_cast<std::size_t>(c) / static_cast<std::size_t>(n),
          count * static_cast<std::size_t>(c + 1) / static_cast<std::size_t>(n)};
}

constexpr int kRingTag = 4242;
constexpr int kShiftTag = 16384;  // above the ring's tags for up to 12000 sites; MPI allows tags to 32767

}  // namespace

std::vector<std::vector<std::byte>> Exchange::timed_all_gather(std::span<const std::byte> mine, ExchangeStats& stats) {
  const auto start = std::chrono::steady_clock::now();
  auto all = comm::shifted_all_gather(leaders_, mine, kShiftTag);
  stats.transfer_seconds += seconds_since(start);
  // The n - 1 shifts go one after another, each paying a latency.
  stats.transfer_messages += static_cast<int>(all.size()) - 1;
  // Every sender's uplink carries its payload to each of the n - 1 others:
  // the largest payload's n - 1 copies are what the slowest uplink waits on.
  std::size_t largest = 0;
  for (const auto& p : all) largest = std::max(largest, p.size());
  stats.critical_bytes += (all.size() - 1) * largest;
  return all;
}

Exchange::Exchange(comm::Communicator& leaders, std::unique_ptr<compression::Codec> codec, ExchangeOptions options)
    : leaders_(leaders), codec_(std::move(codec)), options_(options) {}

std::span<const float> Exchange::residual() const {
  return feedback_ ? feedback_->residual() : std::span<const float>{};
}

void Exchange::set_residual(std::span<const float> residual) {
  if (residual.empty()) {
    feedback_.reset();
    return;
  }
  feedback_.emplace(residual.size(), options_.error_feedback_decay);
  feedback_->set_residual(residual);
}

// The planner's exchange model decides, so a plan and the run it predicts
// take the same algorithm.
ExchangeAlgorithm Exchange::choose(std::size_t count) const {
  if (options_.algorithm != ExchangeAlgorithm::kAuto) return options_.algorithm;
  const int n = leaders_.size();
  const auto chunk = (count + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(std::max(n, 1));
  const auto a = plan::choose_algorithm(plan::AlgorithmSetting::kAuto, n, options_.auth != nullptr,
                                        codec_->payload_size(count), codec_->payload_size(chunk));
  return a == plan::Algorithm::kRing ? ExchangeAlgorithm::kRing : ExchangeAlgorithm::kAllGather;
}

const char* to_string(Exclusion reason) {
  switch (reason) {
    case Exclusion::kNonFinite: return "non-finite";
    case Exclusion::kDiverged: return "diverged";
    case Exclusion::kOutlier: return "outlier";
    case Exclusion::kCorruptPayload: return "corrupt-payload";
    case Exclusion::kUnauthenticated: return "unauthenticated";
  }
  return "unknown";
}

// Every site learns every site's weight, update norm and health, and applies
// the same rules, so all agree on who sits the round out without a vote.
Exchange::Report Exchange::report_of(std::span<const float> delta, const SiteUpdate& update) const {
  Report mine{update.weight, static_cast<double>(update.steps), 0.0, 0.0, static_cast<double>(epoch_)};
  if (update.diverged) {
    mine.status = 2.0;
  } else if (!compression::all_finite(delta) || !std::isfinite(update.weight) || update.weight <= 0.0 ||
             update.steps <= 0) {
    mine.status = 1.0;
  } else {
    mine.norm = std::sqrt(compression::sum_of_squares(delta));
  }
  return mine;
}

std::vector<double> Exchange::agree_shares(const Report& mine, std::vector<ExcludedSite>& excluded) {
  std::vector<std::byte> sealed(sizeof(Report));
  std::memcpy(sealed.data(), &mine, sizeof(Report));
  seal(sealed, "report", 0);
  auto raw = leaders_.all_gather(sealed);
  tamper_arrivals("report", raw);
  std::vector<bool> forged(raw.size(), false);
  for (std::size_t s = 0; s < raw.size(); ++s) forged[s] = !unseal(raw[s], "report", 0, static_cast<int>(s));
  forged = agree_verdicts(std::move(forged), "report", 0);
  std::vector<Report> reports(raw.size());
  for (std::size_t s = 0; s < raw.size(); ++s) {
    if (forged[s]) {
      reports[s] = Report{0.0, 0.0, 0.0, 3.0, mine.epoch};
      continue;
    }
    if (raw[s].size() != sizeof(Report))
      throw ExchangeError("site " + std::to_string(s) + " sent a malformed report", static_cast<int>(s));
    std::memcpy(&reports[s], raw[s].data(), sizeof(Report));
    if (reports[s].epoch != mine.epoch)
      throw ExchangeError("site " + std::to_string(s) + " exchanges in membership epoch " +
                              std::to_string(static_cast<long long>(reports[s].epoch)) + ", this site in " +
                              std::to_string(epoch_),
                          static_cast<int>(s));
  }
  std::vector<double> weights(reports.size(), 0.0);
  std::vector<double> steps(reports.size(), 0.0);
  for (std::size_t s = 0; s < reports.size(); ++s) {
    const auto& r = reports[s];
    if (forged[s]) {
      excluded.push_back({static_cast<int>(s), Exclusion::kUnauthenticated});
      continue;
    }
    if (r.status != 0.0) {
      excluded.push_back({static_cast<int>(s), r.status == 2.0 ? Exclusion::kDiverged : Exclusion::kNonFinite});
      continue;
    }
    if (options_.max_norm_ratio > 0.0) {
      std::vector<double> others;
      for (std::size_t o = 0; o < reports.size(); ++o)
        if (o != s && reports[o].status == 0.0) others.push_back(reports[o].norm);
      if (!others.empty()) {
        std::nth_element(others.begin(), others.begin() + others.size() / 2, others.end());
        const double median = others[others.size() / 2];
        if (r.norm > options_.max_norm_ratio * median) {
          excluded.push_back({static_cast<int>(s), Exclusion::kOutlier});
          continue;
        }
      }
    }
    weights[s] = r.weight;
    steps[s] = r.steps;
  }
  return normalized_shares(weights, steps);
}

void Exchange::decode_into(std::span<const std::byte> payload, std::span<float> acc, float weight, int site,
                           bool markers, ExchangeStats& stats) const {
  if (markers && payload.empty()) {  // the values behind it were not finite
    std::fill(acc.begin(), acc.end(), std::numeric_limits<float>::quiet_NaN());
    note_non_finite(site, stats);
    return;
  }
  const auto err = codec_->decode_accumulate(payload, acc, weight);
  if (err != compression::DecodeError::kOk)
    throw ExchangeError("pseudo-gradient from site " + std::to_string(site) +
                            " rejected: " + std::string(compression::to_string(err)),
                        site);
}

std::uint64_t Exchange::seed_of(std::int64_t round) const {
  return mix(mix(options_.seed ^ static_cast<std::uint64_t>(round)) ^ static_cast<std::uint64_t>(leaders_.rank()));
}

ExchangeStats Exchange::average(std::span<float> delta, const SiteUpdate& mine, std::int64_t round) {
  const auto start = std::chrono::steady_clock::now();
  round_ = round;
  const auto sent_before = leaders_.traffic().bytes_sent;
  ExchangeStats stats;
  const auto agree_start = std::chrono::steady_clock::now();
  const Report report = report_of(delta, mine);
  // Error feedback encodes this site's payload while the reports cross the
  // link, when no report can leave this site out (it is usable and no
  // outlier check compares it with the others): the compression is hidden
  // behind a latency instead of adding to it. delta is not read meanwhile.
  const bool early = options_.error_feedback && report.status == 0.0 && options_.max_norm_ratio <= 0.0;
  std::future<void> encoding;
  if (early) encoding = std::async(std::launch::async, [&] { feedback_encode(delta, seed_of(round)); });
  const auto exact_shares = agree_shares(report, stats.excluded);  // on a throw, ~future waits for the encoding
  if (early) encoding.get();
  stats.agree_seconds = seconds_since(agree_start);
  if (std::all_of(exact_shares.begin(), exact_shares.end(), [](double s) { return s <= 0.0; }))
    throw ExchangeError("no site has a usable pseudo-gradient this round", -1);
  std::vector<float> shares(exact_shares.begin(), exact_shares.end());
  transmit(delta, shares, seed_of(round), stats, /*markers=*/false, /*feedback=*/!early, /*encoded=*/early);
  stats.payload_bytes = leaders_.traffic().bytes_sent - sent_before;
  stats.seconds = seconds_since(start);
  return stats;
}

ExchangeStats Exchange::mean(std::span<float> values, std::span<const float> shares, std::int64_t round) {
  if (shares.size() != static_cast<std::size_t>(leaders_.size()))
    throw std::invalid_argument("Exchange::mean needs one share per site");
  const auto start = std::chrono::steady_clock::now();
  round_ = round;
  const auto sent_before = leaders_.traffic().bytes_sent;
  ExchangeStats stats;
  std::vector<float> fixed(shares.begin(), shares.end());
  const bool finite = compression::all_finite(values);
  transmit(values, fixed, seed_of(round), stats, /*markers=*/true, /*feedback=*/finite, /*encoded=*/false);
  if (!finite || std::any_of(stats.excluded.begin(), stats.excluded.end(),
                             [](const ExcludedSite& e) { return e.reason == Exclusion::kNonFinite; }))
    std::fill(values.begin(), values.end(), std::numeric_limits<float>::quiet_NaN());
  stats.payload_bytes = leaders_.traffic().bytes_sent - sent_before;
  stats.seconds = seconds_since(start);
  return stats;
}

// Error feedback, then the algorithm: `delta` becomes the shares' sum. With
// `markers`, values that cannot be encoded (not finite) go out as empty
// payloads, which every receiver reads as "not finite" (mean() then gives
// NaN everywhere); without, they are an error. `feedback` false keeps the
// error-feedback residual out of it (the caller found the values not finite).
void Exchange::feedback_encode(std::span<float> delta, std::uint64_t seed) {
  if (!feedback_) feedback_.emplace(delta.size(), options_.error_feedback_decay);
  if (feedback_->encode(*codec_, delta, payload_, delta, seed) != compression::EncodeError::kOk)
    throw ExchangeError("cannot encode this site's pseudo-gradient", leaders_.rank());
}

void Exchange::transmit(std::span<float> delta, std::vector<float>& shares, std::uint64_t seed, ExchangeStats& stats,
                        bool markers, bool feedback, bool encoded) {
  const int me = leaders_.rank();
  // Error feedback: transmit decode(encode(delta + residual)); keep the rest.
  if (feedback && options_.error_feedback && shares[me] > 0.0f) {
    feedback_encode(delta, seed);
    encoded = true;
  }
  stats.algorithm = choose(delta.size());
  if (stats.algorithm == ExchangeAlgorithm::kRing) ring_average(delta, shares, seed, stats, markers);
  else all_gather_average(delta, shares, seed, stats, markers, encoded);
}

// payload_ = encode(values). Values that are not finite leave it empty (a
// marker) when markers are in use, and are an error otherwise.
void Exchange::encode(std::span<const float> values, std::uint64_t seed, bool markers, const char* what) {
  // Not cleared first: the codec resizes it, and a buffer that grows from
  // empty is zero-filled, one more pass over the payload.
  if (codec_->encode(values, payload_, seed) == compression::EncodeError::kOk) return;
  if (!markers) throw ExchangeError(std::string("cannot encode ") + what, leaders_.rank());
  payload_.clear();
}

void Exchange::note_non_finite(int site, ExchangeStats& stats) {
  const ExcludedSite e{site, Exclusion::kNonFinite};
  if (std::find(stats.excluded.begin(), stats.excluded.end(), e) == stats.excluded.end()) stats.excluded.push_back(e);
}

// Every site decodes the very same bytes, so every site reaches the same
// verdict on a bad payload without a vote; with a key, what a tampered link
// changed on one leg only is agreed first (agree_verdicts), so every site
// leaves out the same senders.
void Exchange::accumulate_part(std::vector<std::vector<std::byte>>& payloads, std::size_t part,
                               std::span<float> values, std::vector<float>& shares, ExchangeStats& stats,
                               bool markers) {
  std::vector<bool> forged(payloads.size(), false);
  for (std::size_t s = 0; s < payloads.size(); ++s)  // checked before any decoding
    forged[s] = shares[s] > 0.0f && !unseal(payloads[s], "payload", part, static_cast<int>(s));
  forged = agree_verdicts(std::move(forged), "payload", part);
  double total = 0.0, kept = 0.0;
  for (std::size_t s = 0; s < payloads.size(); ++s) {
    if (shares[s] <= 0.0f) continue;
    if (!forged[s] && markers && payloads[s].empty()) {  // not finite: the caller makes the whole result NaN
      note_non_finite(static_cast<int>(s), stats);
      continue;
    }
    total += shares[s];
    if (forged[s]) {
      stats.excluded.push_back({static_cast<int>(s), Exclusion::kUnauthenticated});
      shares[s] = 0.0f;
      continue;
    }
    const auto err = codec_->decode_accumulate(payloads[s], values, shares[s]);
    if (err == compression::DecodeError::kOk) {
      kept += shares[s];
      continue;
    }
    stats.excluded.push_back({static_cast<int>(s), Exclusion::kCorruptPayload});
    shares[s] = 0.0f;
  }
  if (kept == total) return;
  if (kept <= 0.0) throw ExchangeError("no site has a usable pseudo-gradient this round", -1);
  const auto scale = static_cast<float>(total / kept);
  for (float& v : values) v *= scale;
  for (float& share : shares) share *= scale;
}

void Exchange::all_gather_average(std::span<float> delta, std::vector<float>& shares, std::uint64_t seed,
                                  ExchangeStats& stats, bool markers, bool encoded) {
  const int me = leaders_.rank();
  const std::size_t granule = codec_->split_granule();
  std::size_t part = delta.size();
  const std::size_t whole_bytes = codec_->payload_size(delta.size());
  if (granule > 0 && whole_bytes > options_.part_bytes) {
    const double values_per_byte = static_cast<double>(delta.size()) / static_cast<double>(whole_bytes);
    const auto values = static_cast<std::size_t>(values_per_byte * static_cast<double>(options_.part_bytes));
    part = std::max(granule, values / granule * granule);
  }
  const std::size_t parts = part == 0 ? 1 : (delta.size() + part - 1) / part;
  for (std::size_t p = 0; p < parts; ++p) {
    const std::size_t first = p * part;
    auto values = delta.subspan(first, std::min(part, delta.size() - first));
    // Error feedback's payload is what its residual was kept against: sent
    // as it is, not encoded a second time from its own decoding.
    if (shares[me] <= 0.0f) payload_.clear();  // sitting the round out: an empty payload
    else if (!encoded || parts > 1)
      encode(values, parts == 1 ? seed : mix(seed + p), markers, "this site's pseudo-gradient");
    if (options_.tamper && shares[me] > 0.0f) options_.tamper(payload_);
    seal(payload_, "payload", p);  // an empty one too: "not finite" must come from its sender
    auto payloads = timed_all_gather(payload_, stats);
    tamper_arrivals("payload", payloads);
    std::fill(values.begin(), values.end(), 0.0f);
    accumulate_part(payloads, p, values, shares, stats, markers);
  }
  if (parts > 1) {
    payload_.clear();
    payload_.shrink_to_fit();
  }
}

void Exchange::ring_average(std::span<float> delta, const std::vector<float>& shares, std::uint64_t seed,
                            ExchangeStats& stats, bool markers) {
  const int n = leaders_.size();
  const int me = leaders_.rank();
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  // Each site's own weighted contribution (zero when it sits the round out).
  std::vector<float> partial(delta.size(), 0.0f);
  if (shares[me] > 0.0f)
    for (std::size_t i = 0; i < delta.size(); ++i) partial[i] = shares[me] * delta[i];

  // Reduce-scatter: after n-1 hops this site holds the full sum of chunk me+1.
  for (int step = 0; step < n - 1; ++step) {
    const int send_chunk = ((me - step) % n + n) % n;
    const int recv_chunk = ((me - step - 1) % n + n) % n;
    auto [sb, se] = chunk(delta.size(), n, send_chunk);
    encode(std::span<const float>(partial).subspan(sb, se - sb), mix(seed + step), markers, "a ring chunk");
    const auto hop_start = std::chrono::steady_clock::now();
    auto incoming = leaders_.send_recv(payload_, next, prev, kRingTag + step);
    stats.transfer_seconds += seconds_since(hop_start);
    stats.transfer_messages += 1;
    stats.critical_bytes += std::max(payload_.size(), incoming.size());
    auto [rb, re] = chunk(delta.size(), n, recv_chunk);
    decode_into(incoming, std::span<float>(partial).subspan(rb, re - rb), 1.0f, prev, markers, stats);
  }

  // All-gather of the reduced chunks: each owner encodes once and every site,
  // the owner included, decodes those same bytes.
  const int owned = (me + 1) % n;
  auto [ob, oe] = chunk(delta.size(), n, owned);
  encode(std::span<const float>(partial).subspan(ob, oe - ob), mix(seed + n), markers, "the reduced chunk");
  auto reduced = timed_all_gather(payload_, stats);
  std::fill(delta.begin(), delta.end(), 0.0f);
  for (int s = 0; s < n; ++s) {
    auto [b, e] = chunk(delta.size(), n, (s + 1) % n);
    decode_into(reduced[s], delta.subspan(b, e - b), 1.0f, s, markers, stats);
  }
}

}  // namespace diloco::outer
