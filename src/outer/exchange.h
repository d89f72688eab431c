// Exchange of pseudo-gradients between site leaders. Two algorithms, written
// against comm::Communicator only:
//  - all-gather: each leader encodes its pseudo-gradient once, all leaders
//    gather every payload and decode-sum them in rank order;
//  - ring: reduce-scatter that decodes, adds and re-encodes per hop (as
//    INTELLECT-1 does for int8), then an all-gather of the reduced chunks.
// Either way every site decodes the same bytes in the same order, so every
// site computes the bit-identical weighted average.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "comm/communicator.h"
#include "comm/message_auth.h"
#include "diloco/compression/codec.h"
#include "diloco/compression/error_feedback.h"

namespace diloco::outer {

// A peer's payload failed its checks, or no site had a usable pseudo-gradient.
class ExchangeError : public std::runtime_error {
 public:
  ExchangeError(const std::string& what, int site) : std::runtime_error(what), site_(site) {}
  int site() const { return site_; }

 private:
  int site_;
};

enum class ExchangeAlgorithm {
  kAuto,       // whichever sends fewer bytes (ties go to all-gather: no requantization)
  kAllGather,
  kRing,
};

// Why a site sits a round out.
enum class Exclusion {
  kNonFinite,  // its pseudo-gradient holds NaN or infinity
  kDiverged,   // its training loss became non-finite; it restarts from the global params
  kOutlier,    // its pseudo-gradient norm is beyond max_norm_ratio times the median of the others
  kCorruptPayload,  // its payload failed to decode on every site (from that part of the exchange on)
  kUnauthenticated,  // its report or payload failed the HMAC check ([security] key_file)
};

const char* to_string(Exclusion reason);

struct ExcludedSite {
  int site = 0;
  Exclusion reason = Exclusion::kNonFinite;
  bool operator==(const ExcludedSite&) const = default;
};

struct ExchangeOptions {
  ExchangeAlgorithm algorithm = ExchangeAlgorithm::kAuto;
  bool error_feedback = false;
  float error_feedback_decay = 1.0f;
  std::uint64_t seed = 0;  // stochastic rounding
  double max_norm_ratio = 0.0;  // 0: no outlier check
  // The all-gather exchange moves pseudo-gradients in parts whose payload is
  // at most about this many bytes (cut at the codec's blocks), so its buffers
  // stay a few MB instead of sites x payload; codecs that cannot be cut
  // (top-k) go whole. Each part costs one more latency, so parts stay large
  // against a WAN's latency-bandwidth product (8 MB: 0.67 s at 100 Mbit/s).
  std::size_t part_bytes = std::size_t{8} << 20;
  // Test-only fault injection: rewrites this site's encoded payload before it
  // is sent (a faulty or hostile peer).
  std::function<void(std::vector<std::byte>& payload)> tamper = nullptr;
  // With a key, every report and payload carries an HMAC-SHA256 over its
  // bytes and what it is (epoch, round, part, sender), checked before
  // anything is decoded; a site whose message fails is left out of the
  // round (kUnauthenticated). `auto` then always picks all-gather, where one
  // site's message can be left out alone.
  const comm::MessageAuth* auth = nullptr;
  // Test-only: in this exchange round this site's tags are forged (made
  // without the key), as an attacker's would be.
  std::int64_t forge_round = -1;
  // Test-only: rewrites what arrives here from `sender` (its message kind
  // "report" or "payload") before any check, as a tampered link between
  // that sender and this site alone would.
  std::function<void(const char* kind, int sender, std::vector<std::byte>& message)> tamper_received = nullptr;
};

// What one site brings to an exchange besides its pseudo-gradient.
struct SiteUpdate {
  double weight = 1.0;  // tokens this round
  int steps = 1;        // inner steps behind the pseudo-gradient (FedNova normalization)
  bool diverged = false;  // its training loss became non-finite
};

struct ExchangeStats {
  std::uint64_t payload_bytes = 0;   // bytes this leader sent in this exchange
  ExchangeAlgorithm algorithm = ExchangeAlgorithm::kAllGather;
  std::vector<ExcludedSite> excluded;  // sites left out of this round, in site order
  double seconds = 0.0;
  // The first, tiny gather that agrees on weights: on the last site to arrive
  // it costs one message; on the others it also holds the wait for that site.
  double agree_seconds = 0.0;
  // The payload transfers alone (no encoding), for the passive link estimate:
  // their time, how many went in sequence and the bytes on that critical path
  // (a ring hop's larger message; an all-gather's largest payload n - 1
  // times, as its sender's uplink carries it).
  double transfer_seconds = 0.0;
  int transfer_messages = 0;
  std::uint64_t critical_bytes = 0;
};

class Exchange {
 public:
  Exchange(comm::Communicator& leaders, std::unique_ptr<compression::Codec> codec, ExchangeOptions options = {});

  // Replaces `delta` with sum_i share_i * delta_i over the sites that are not
  // excluded: share_i = w_i / sum_j w_j when all ran the same steps, the
  // FedNova normalization (normalized_shares) when they did not. `round`
  // makes stochastic rounding differ between rounds.
  ExchangeStats average(std::span<float> delta, const SiteUpdate& mine, std::int64_t round = 0);

  // Data parallelism: replaces `values` with sum_i shares[i] * values_i over
  // every site, the shares fixed beforehand and the same on every site (no
  // agreement message). If any site's values are not finite, every site gets
  // NaN values (and all skip the step alike); a payload that fails its checks
  // leaves its site out, the rest rescaled, as average() does. `round`
  // varies stochastic rounding.
  ExchangeStats mean(std::span<float> values, std::span<const float> shares, std::int64_t round);

  // The membership epoch this site exchanges in (sites launched apart); it
  // heads every exchange's first message, and a peer in another epoch is an
  // ExchangeError. 0 for a run launched as one job.
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }

  // The algorithm `kAuto` picks for `count` elements on this many sites.
  ExchangeAlgorithm choose(std::size_t count) const;

  const compression::Codec& codec() const { return *codec_; }
  // What error feedback holds back (empty when it is off).
  std::span<const float> residual() const;
  // Restores a residual saved from residual() (a checkpoint); empty clears it.
  void set_residual(std::span<const float> residual);

 private:
  // What a site tells the others before an average (doubles on the wire).
  struct Report {
    double weight;
    double steps;
    double norm;
    double status;  // 0 usable, 1 non-finite, 2 diverged
    double epoch;   // the sender's membership epoch
  };
  Report report_of(std::span<const float> delta, const SiteUpdate& mine) const;
  // Every site's share of the average (0: excluded, and why in `excluded`).
  std::vector<double> agree_shares(const Report& mine, std::vector<ExcludedSite>& excluded);
  // Error feedback: payload_ = encode(delta + residual), delta = its decoding.
  void feedback_encode(std::span<float> delta, std::uint64_t seed);
  std::uint64_t seed_of(std::int64_t round) const;
  // `encoded`: feedback_encode already ran on delta (payload_ holds it).
  void transmit(std::span<float> delta, std::vector<float>& shares, std::uint64_t seed, ExchangeStats& stats,
                bool markers, bool feedback, bool encoded);
  void encode(std::span<const float> values, std::uint64_t seed, bool markers, const char* what);
  // `encoded`: payload_ already holds encode(delta, seed) (error feedback
  // made it), so a single-part exchange sends it as it is.
  void all_gather_average(std::span<float> delta, std::vector<float>& shares, std::uint64_t seed,
                          ExchangeStats& stats, bool markers, bool encoded);
  void ring_average(std::span<float> delta, const std::vector<float>& shares, std::uint64_t seed,
                    ExchangeStats& stats, bool markers);
  static void note_non_finite(int site, ExchangeStats& stats);
  // Appends this site's tag to `message` (what `kind` it is, `part`).
  void seal(std::vector<std::byte>& message, const char* kind, std::size_t part) const;
  // Checks and strips `sender`'s tag; false when it fails.
  bool unseal(std::vector<std::byte>& message, const char* kind, std::size_t part, int sender) const;
  std::string context(const char* kind, std::size_t part, int sender) const;
  // With a key: every site learns which senders' `kind` messages failed
  // their check anywhere, and all leave out that same set (true = failed).
  std::vector<bool> agree_verdicts(std::vector<bool> failed, const char* kind, std::size_t part);
  // The test-only tamper_received hook on what all_gather brought in.
  void tamper_arrivals(const char* kind, std::vector<std::vector<std::byte>>& messages) const;
  std::vector<std::vector<std::byte>> timed_all_gather(std::span<const std::byte> mine, ExchangeStats& stats);
  // With `markers`, an empty payload stands for values that were not finite:
  // `acc` becomes NaN.
  void decode_into(std::span<const std::byte> payload, std::span<float> acc, float weight, int site, bool markers,
                   ExchangeStats& stats) const;
  // Decodes every usable site's payload of one part into `values`. A payload
  // that fails to decode writes nothing; its sender is left out of this part
  // (the others' sum is rescaled to the full weight) and of every later part.
  void accumulate_part(std::vector<std::vector<std::byte>>& payloads, std::size_t part, std::span<float> values,
                       std::vector<float>& shares, ExchangeStats& stats, bool markers);

  comm::Communicator& leaders_;
  std::unique_ptr<compression::Codec> codec_;
  ExchangeOptions options_;
  std::optional<compression::ErrorFeedback> feedback_;
  std::vector<std::byte> payload_;
  std::int64_t epoch_ = 0;
  std::int64_t round_ = 0;  // the exchange under way (seals name it)
};

}  // namespace diloco::outer
