// The exchange between site leaders on real ranks (every rank is a leader
// here): all codecs, both algorithms, bit-identical results on every site,
// the weighted average, and sites with non-finite pseudo-gradients left out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "comm/message_auth.h"
#include "comm/mpi_communicator.h"
#include "diloco/compression/crc32c.h"
#include "diloco/compression/wire_format.h"
#include "outer/exchange.h"
#include "outer/pseudo_gradient.h"

using namespace diloco;

namespace {

std::vector<float> site_delta(int site, std::size_t n) {
  std::mt19937 rng(1000 + site);
  std::normal_distribution<float> d(0.0f, 0.01f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<std::vector<float>> gather(comm::Communicator& world, std::span<const float> v) {
  auto raw = world.all_gather(std::as_bytes(v));
  std::vector<std::vector<float>> out(raw.size());
  for (std::size_t r = 0; r < raw.size(); ++r) {
    out[r].resize(raw[r].size() / sizeof(float));
    std::memcpy(out[r].data(), raw[r].data(), raw[r].size());
  }
  return out;
}

struct Case {
  std::string codec;
  outer::ExchangeAlgorithm algorithm;
  double tolerance;  // max abs error against the exact weighted average, per unit of delta scale
};

}  // namespace

// Sites that ran different step counts are averaged with FedNova shares.
TEST(ExchangeTest, UnequalStepCountsAreNormalized) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  const std::size_t count = 257;
  std::vector<double> weights, steps;
  for (int s = 0; s < n; ++s) {
    steps.push_back(10.0 * (s + 1));
    weights.push_back(64.0 * steps.back());  // 64 tokens per step everywhere
  }
  const auto shares = outer::normalized_shares(weights, steps);
  std::vector<float> expected(count, 0.0f);
  for (int s = 0; s < n; ++s) {
    auto d = site_delta(s, count);
    for (std::size_t i = 0; i < count; ++i) expected[i] += static_cast<float>(shares[s]) * d[i];
  }
  outer::Exchange exchange(*world, compression::make_codec("none"),
                           outer::ExchangeOptions{outer::ExchangeAlgorithm::kAllGather, false});
  auto delta = site_delta(world->rank(), count);
  const int me = world->rank();
  exchange.average(delta, {weights[me], static_cast<int>(steps[me])}, 1);
  for (std::size_t i = 0; i < count; ++i) ASSERT_NEAR(delta[i], expected[i], 1e-6) << "element " << i;
}

TEST(ExchangeTest, EverySiteGetsTheSameWeightedAverage) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  const std::size_t count = 1001;  // not a multiple of the site count or the block
  std::vector<double> weights;
  for (int s = 0; s < n; ++s) weights.push_back(1.0 + s);  // unequal token counts
  double total = 0.0;
  for (double w : weights) total += w;
  std::vector<float> exact(count, 0.0f);
  for (int s = 0; s < n; ++s) {
    auto d = site_delta(s, count);
    for (std::size_t i = 0; i < count; ++i) exact[i] += static_cast<float>(weights[s] / total) * d[i];
  }
  const std::vector<Case> cases{
      {"none", outer::ExchangeAlgorithm::kAllGather, 1e-7}, {"none", outer::ExchangeAlgorithm::kRing, 1e-7},
      {"fp16", outer::ExchangeAlgorithm::kAllGather, 2e-5}, {"bf16", outer::ExchangeAlgorithm::kRing, 3e-4},
      {"int8", outer::ExchangeAlgorithm::kAllGather, 4e-4}, {"int8", outer::ExchangeAlgorithm::kRing, 8e-4},
      {"int4", outer::ExchangeAlgorithm::kAllGather, 6e-3}, {"sign", outer::ExchangeAlgorithm::kAllGather, 0.05},
      {"topk", outer::ExchangeAlgorithm::kAllGather, 0.05}, {"topk+int8", outer::ExchangeAlgorithm::kRing, 0.05},
  };
  for (const auto& c : cases) {
    auto exchange = std::make_unique<outer::Exchange>(*world, compression::make_codec(c.codec),
                                                      outer::ExchangeOptions{c.algorithm, false, 7});
    auto delta = site_delta(world->rank(), count);
    auto stats = exchange->average(delta, {weights[world->rank()]}, 3);
    EXPECT_TRUE(stats.excluded.empty());
    if (n > 1) {
      EXPECT_GT(stats.payload_bytes, 0u);
    }
    double max_err = 0.0;
    for (std::size_t i = 0; i < count; ++i) max_err = std::max(max_err, double(std::abs(delta[i] - exact[i])));
    EXPECT_LE(max_err, c.tolerance) << c.codec << (c.algorithm == outer::ExchangeAlgorithm::kRing ? " ring" : " gather");
    auto all = gather(*world, delta);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(std::memcmp(all[r].data(), delta.data(), count * sizeof(float)), 0)
          << c.codec << ": site " << r << " averaged differently";
  }
}

TEST(ExchangeTest, AutoPicksTheAlgorithmThatSendsFewerBytes) {
  auto world = comm::MpiCommunicator::world();
  outer::Exchange exchange(*world, compression::make_codec("int8"));
  const auto choice = exchange.choose(1 << 20);
  if (world->size() < 3) {
    EXPECT_EQ(choice, outer::ExchangeAlgorithm::kAllGather);  // equal bytes: no requantization wins
  } else {
    EXPECT_EQ(choice, outer::ExchangeAlgorithm::kRing);
    // And the ring really sends fewer bytes than the all-gather.
    const std::size_t count = 1 << 16;
    auto d = site_delta(world->rank(), count);
    outer::Exchange ring(*world, compression::make_codec("int8"), {outer::ExchangeAlgorithm::kRing});
    outer::Exchange gather_all(*world, compression::make_codec("int8"), {outer::ExchangeAlgorithm::kAllGather});
    auto a = d;
    auto b = d;
    const auto ring_bytes = ring.average(a, {}).payload_bytes;
    const auto gather_bytes = gather_all.average(b, {}).payload_bytes;
    EXPECT_LT(ring_bytes, gather_bytes);
  }
}

TEST(ExchangeTest, NonFiniteSiteIsLeftOutOnEverySite) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "needs two sites";
  for (auto algorithm : {outer::ExchangeAlgorithm::kAllGather, outer::ExchangeAlgorithm::kRing}) {
    outer::Exchange exchange(*world, compression::make_codec("none"), {algorithm});
    auto delta = site_delta(world->rank(), 100);
    if (world->rank() == 1) delta[17] = std::nanf("");
    auto stats = exchange.average(delta, {});
    ASSERT_EQ(stats.excluded.size(), 1u);
    EXPECT_EQ(stats.excluded[0].site, 1);
    EXPECT_EQ(stats.excluded[0].reason, outer::Exclusion::kNonFinite);
    // The average over the remaining n - 1 sites, equally weighted.
    std::vector<float> expected(100, 0.0f);
    for (int s = 0; s < n; ++s) {
      if (s == 1) continue;
      auto d = site_delta(s, 100);
      for (int i = 0; i < 100; ++i) expected[i] += d[i] / static_cast<float>(n - 1);
    }
    for (int i = 0; i < 100; ++i) ASSERT_NEAR(delta[i], expected[i], 1e-7) << i;
  }
}

TEST(ExchangeTest, OutlierNormAndDivergedSitesAreLeftOutWithTheirReason) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  if (n < 3) GTEST_SKIP() << "an outlier needs a median of at least two others";
  outer::ExchangeOptions options;
  options.max_norm_ratio = 10.0;
  outer::Exchange exchange(*world, compression::make_codec("none"), options);
  auto delta = site_delta(world->rank(), 100);
  if (world->rank() == 0) for (auto& v : delta) v *= 100.0f;  // a runaway site
  const bool diverged = world->rank() == n - 1;
  auto stats = exchange.average(delta, {1.0, 1, diverged}, 0);
  ASSERT_EQ(stats.excluded.size(), 2u);
  EXPECT_EQ(stats.excluded[0], (outer::ExcludedSite{0, outer::Exclusion::kOutlier}));
  EXPECT_EQ(stats.excluded[1], (outer::ExcludedSite{n - 1, outer::Exclusion::kDiverged}));
  std::vector<float> expected(100, 0.0f);
  for (int s = 1; s < n - 1; ++s) {
    auto d = site_delta(s, 100);
    for (int i = 0; i < 100; ++i) expected[i] += d[i] / static_cast<float>(n - 2);
  }
  for (int i = 0; i < 100; ++i) ASSERT_NEAR(delta[i], expected[i], 1e-7) << i;
}

TEST(ExchangeTest, NoUsableSiteIsAnError) {
  auto world = comm::MpiCommunicator::world();
  outer::Exchange exchange(*world, compression::make_codec("none"));
  std::vector<float> delta(10, std::numeric_limits<float>::infinity());
  EXPECT_THROW(exchange.average(delta, {}), outer::ExchangeError);
}

TEST(ExchangeTest, ErrorFeedbackKeepsWhatWasNotSent) {
  auto world = comm::MpiCommunicator::world();
  compression::CodecConfig config;
  config.name = "topk";
  config.topk_ratio = 0.1;
  outer::Exchange exchange(*world, compression::make_codec(config), {outer::ExchangeAlgorithm::kAllGather, true, 1});
  const auto original = site_delta(world->rank(), 500);
  auto delta = original;
  exchange.average(delta, {});
  ASSERT_EQ(exchange.residual().size(), 500u);
  // 90% of the entries were not sent and are kept whole for the next round;
  // the 10% sent keep only their fp16 rounding error.
  int held_back = 0;
  for (std::size_t i = 0; i < 500; ++i) {
    const float r = exchange.residual()[i];
    if (r == original[i]) {
      ++held_back;
    } else {
      EXPECT_LE(std::abs(r), std::abs(original[i]) * std::ldexp(1.0f, -11)) << i;
    }
  }
  EXPECT_EQ(held_back, 450);
}

// Error feedback encodes while the sites' reports cross the link when no
// report can leave this site out (no outlier check), and after the agreement
// otherwise: rounds of both give the same averages and residuals, bit for
// bit, with both algorithms and a cut codec and an uncut one.
TEST(ExchangeTest, ErrorFeedbackDuringTheAgreementEqualsAfterIt) {
  auto world = comm::MpiCommunicator::world();
  for (const char* codec : {"int8", "topk"}) {
    for (auto algorithm : {outer::ExchangeAlgorithm::kAllGather, outer::ExchangeAlgorithm::kRing}) {
      outer::ExchangeOptions during;
      during.algorithm = algorithm;
      during.error_feedback = true;
      during.error_feedback_decay = 0.5f;
      outer::ExchangeOptions after = during;
      after.max_norm_ratio = 1e30;  // on, and never met: the encoding waits for the agreement
      outer::Exchange early(*world, compression::make_codec(codec), during);
      outer::Exchange late(*world, compression::make_codec(codec), after);
      for (int round = 0; round < 3; ++round) {
        auto a = site_delta(world->rank() + 10 * round, 1000);
        auto b = a;
        const auto sa = early.average(a, {}, round);
        const auto sb = late.average(b, {}, round);
        EXPECT_TRUE(sa.excluded.empty() && sb.excluded.empty());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << codec << " round " << round;
        ASSERT_EQ(early.residual().size(), late.residual().size());
        EXPECT_EQ(std::memcmp(early.residual().data(), late.residual().data(), a.size() * sizeof(float)), 0)
            << codec << " round " << round;
        EXPECT_EQ(sa.payload_bytes, sb.payload_bytes);
      }
    }
  }
}

// The all-gather exchange moves long vectors in parts cut at codec blocks:
// the result is bit for bit that of one whole payload, and the largest
// message shrinks to a part; top-k, which cannot be cut, still goes whole.
// Makes value `index` of an encoded element payload NaN (all bits set) and
// fixes the checksum: what a faulty or hostile peer could send.
void poison(std::vector<std::byte>& payload, std::size_t width, std::size_t index) {
  const std::size_t at = compression::kWireHeaderSize + index * width;
  if (payload.size() < at + width) return;
  std::fill(payload.begin() + static_cast<std::ptrdiff_t>(at), payload.begin() + static_cast<std::ptrdiff_t>(at + width),
            std::byte{0xFF});
  const auto crc = compression::crc32c(std::span<const std::byte>(payload).subspan(compression::kWireHeaderSize));
  std::memcpy(payload.data() + 28, &crc, 4);
}

// A payload that decodes to NaN (valid checksum) leaves its sender out of the
// round on every site, the same way: the others' average, bit-identical.
TEST(ExchangeTest, CorruptPayloadSenderIsLeftOutOnEverySite) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "needs two sites";
  const std::size_t count = 300;
  for (const std::string codec : {"none", "fp16", "bf16"}) {
    outer::ExchangeOptions options;
    options.algorithm = outer::ExchangeAlgorithm::kAllGather;
    if (world->rank() == 1) options.tamper = [&](auto& p) { poison(p, codec == "none" ? 4 : 2, 123); };
    outer::Exchange exchange(*world, compression::make_codec(codec), options);
    auto delta = site_delta(world->rank(), count);
    const auto stats = exchange.average(delta, {});
    ASSERT_EQ(stats.excluded.size(), 1u) << codec;
    EXPECT_EQ(stats.excluded[0], (outer::ExcludedSite{1, outer::Exclusion::kCorruptPayload})) << codec;
    for (float v : delta) ASSERT_TRUE(std::isfinite(v)) << codec;
    // Close to the others' average (the codec rounds), identical everywhere.
    std::vector<float> expected(count, 0.0f);
    for (int s = 0; s < n; ++s)
      if (s != 1)
        for (std::size_t i = 0; i < count; ++i) expected[i] += site_delta(s, count)[i] / static_cast<float>(n - 1);
    for (std::size_t i = 0; i < count; ++i) ASSERT_NEAR(delta[i], expected[i], 1e-4) << codec << " " << i;
    for (const auto& other : gather(*world, delta))
      ASSERT_EQ(std::memcmp(other.data(), delta.data(), count * sizeof(float)), 0) << codec;
  }
}

// In parts, a sender refused in a later part keeps what was averaged before
// With a key, a message tampered on one leg of the all-gather (sender 1 to
// the last site only, so only that site's check fails) leaves its sender
// out on every site, in every part and for the report, and the sites' results
// stay bit-identical. Per-receiver verdicts would leave it out on one site
// only, and the results would differ.
TEST(ExchangeTest, TamperedLegLeavesTheSenderOutOnEverySiteWithAKey) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  if (n < 3) GTEST_SKIP() << "needs a site whose leg is not tampered";
  const comm::MessageAuth auth(std::string(32, 'k'));
  const std::size_t count = 5000;
  for (const std::string kind : {"payload", "report"}) {
    outer::ExchangeOptions options;
    options.algorithm = outer::ExchangeAlgorithm::kAllGather;
    options.auth = &auth;
    options.part_bytes = 4000;  // several parts: the verdict holds in each
    if (world->rank() == n - 1)
      options.tamper_received = [&](const char* what, int sender, std::vector<std::byte>& message) {
        if (sender == 1 && kind == what && !message.empty()) message[message.size() / 2] ^= std::byte{0x40};
      };
    outer::Exchange exchange(*world, compression::make_codec("none"), options);
    auto delta = site_delta(world->rank(), count);
    const auto stats = exchange.average(delta, {});
    ASSERT_EQ(stats.excluded, (std::vector<outer::ExcludedSite>{{1, outer::Exclusion::kUnauthenticated}})) << kind;
    std::vector<float> others(count, 0.0f);
    for (int s = 0; s < n; ++s)
      if (s != 1)
        for (std::size_t i = 0; i < count; ++i) others[i] += site_delta(s, count)[i] / static_cast<float>(n - 1);
    for (std::size_t i = 0; i < count; ++i) ASSERT_NEAR(delta[i], others[i], 1e-6) << kind << " " << i;
    for (const auto& other : gather(*world, delta))
      ASSERT_EQ(std::memcmp(other.data(), delta.data(), count * sizeof(float)), 0) << kind;
  }
}
// and is left out of that part and the rest; every site agrees.
TEST(ExchangeTest, CorruptLaterPartLeavesTheSenderOutFromThere) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "needs two sites";
  const std::size_t count = 5000;
  outer::ExchangeOptions options;
  options.algorithm = outer::ExchangeAlgorithm::kAllGather;
  options.part_bytes = 4000;  // about 1000 fp32 values a part
  int part = 0;
  if (world->rank() == 1) options.tamper = [&](auto& p) { if (part++ == 2) poison(p, 4, 5); };
  outer::Exchange exchange(*world, compression::make_codec("none"), options);
  auto delta = site_delta(world->rank(), count);
  const auto stats = exchange.average(delta, {});
  ASSERT_EQ(stats.excluded, (std::vector<outer::ExcludedSite>{{1, outer::Exclusion::kCorruptPayload}}));
  std::vector<float> all(count, 0.0f), others(count, 0.0f);
  for (int s = 0; s < n; ++s)
    for (std::size_t i = 0; i < count; ++i) {
      const float d = site_delta(s, count)[i];
      all[i] += d / static_cast<float>(n);
      if (s != 1) others[i] += d / static_cast<float>(n - 1);
    }
  std::size_t first_without = count;
  for (std::size_t i = 0; i < count; ++i) {
    const bool with = std::abs(delta[i] - all[i]) <= 1e-6f;
    const bool without = std::abs(delta[i] - others[i]) <= 1e-6f;
    ASSERT_TRUE(with || without) << i;
    if (!with && first_without == count) first_without = i;
    if (i >= first_without) {
      ASSERT_TRUE(without) << i;
    }
  }
  EXPECT_GT(first_without, 1000u);  // parts 0 and 1 kept site 1
  EXPECT_LT(first_without, 3000u);
  for (const auto& other : gather(*world, delta))
    ASSERT_EQ(std::memcmp(other.data(), delta.data(), count * sizeof(float)), 0);
}

TEST(ExchangeTest, PartsCutAtBlocksAverageExactlyLikeOneWholePayload) {
  auto world = comm::MpiCommunicator::world();
  const std::size_t count = 10000;
  for (const std::string codec : {"none", "int8", "fp16", "topk"}) {
    auto run = [&](std::size_t part_bytes, outer::ExchangeStats* stats) {
      outer::ExchangeOptions options;
      options.algorithm = outer::ExchangeAlgorithm::kAllGather;
      options.part_bytes = part_bytes;
      outer::Exchange exchange(*world, compression::make_codec(codec), options);
      auto delta = site_delta(world->rank(), count);
      *stats = exchange.average(delta, {1.0 + world->rank(), 1, false}, 3);
      return delta;
    };
    outer::ExchangeStats whole_stats, part_stats;
    const auto whole = run(std::size_t{1} << 30, &whole_stats);
    const auto parts = run(1000, &part_stats);  // int8: 1000 bytes hold ~970 values, cut at 768 (3 blocks)
    EXPECT_EQ(std::memcmp(whole.data(), parts.data(), count * sizeof(float)), 0) << codec;
    if (codec == "topk") {
      EXPECT_EQ(part_stats.transfer_messages, whole_stats.transfer_messages);
    } else {
      // Each part's all-gather goes in n - 1 shifts, one message each.
      const int shifts = world->size() - 1;
      if (shifts > 0) {
        EXPECT_GT(part_stats.transfer_messages, whole_stats.transfer_messages + 8 * shifts) << codec;
      }
      EXPECT_LE(part_stats.critical_bytes, whole_stats.critical_bytes * 2) << codec;  // same bytes in all, in parts
      if (world->size() == 1) {
        EXPECT_EQ(whole_stats.critical_bytes, 0u) << codec;  // one site: nothing crosses a link
        EXPECT_EQ(part_stats.transfer_messages, 0) << codec;
      }
    }
  }
}

// Data parallelism: fixed shares, no agreement message; the result equals
// the shares' sum on every site, and one site's non-finite values make every
// site's result NaN (so all skip the step), with either algorithm and with
// error feedback, whose residual the bad values do not touch.
TEST(ExchangeTest, MeanWithFixedSharesAndNonFiniteValuesEverywhereAlike) {
  auto world = comm::MpiCommunicator::world();
  const int n = world->size();
  const std::size_t count = 1001;
  std::vector<float> shares;
  for (int s = 0; s < n; ++s) shares.push_back(static_cast<float>(s + 1) / static_cast<float>(n * (n + 1) / 2));
  std::vector<float> exact(count, 0.0f);
  for (int s = 0; s < n; ++s) {
    auto d = site_delta(s, count);
    for (std::size_t i = 0; i < count; ++i) exact[i] += shares[s] * d[i];
  }
  for (auto algorithm : {outer::ExchangeAlgorithm::kAllGather, outer::ExchangeAlgorithm::kRing}) {
    for (const char* codec : {"none", "int8"}) {
      const bool lossy = std::string(codec) != "none";
      outer::Exchange exchange(*world, compression::make_codec(codec), {algorithm, lossy});
      const auto sent_before = world->traffic().bytes_sent;
      auto values = site_delta(world->rank(), count);
      auto stats = exchange.mean(values, shares, 1);
      EXPECT_TRUE(stats.excluded.empty());
      EXPECT_EQ(stats.agree_seconds, 0.0);
      if (n > 1) {
        EXPECT_GT(stats.payload_bytes, 0u);
      }
      double worst = 0.0;
      for (std::size_t i = 0; i < count; ++i) worst = std::max(worst, double(std::abs(values[i] - exact[i])));
      EXPECT_LE(worst, lossy ? 8e-4 : 1e-7) << codec;
      auto all = gather(*world, values);
      for (int r = 0; r < n; ++r) ASSERT_EQ(std::memcmp(all[r].data(), values.data(), count * sizeof(float)), 0);
      if (n < 2) continue;

      const std::vector<float> residual(exchange.residual().begin(), exchange.residual().end());
      values = site_delta(world->rank(), count);
      if (world->rank() == n - 1) values[5] = std::numeric_limits<float>::infinity();
      stats = exchange.mean(values, shares, 2);
      for (float v : values) ASSERT_TRUE(std::isnan(v)) << codec << ": every site must see NaN";
      ASSERT_FALSE(stats.excluded.empty());
      EXPECT_EQ(stats.excluded.front().reason, outer::Exclusion::kNonFinite);
      if (world->rank() == n - 1 && lossy) {
        ASSERT_EQ(exchange.residual().size(), residual.size());
        EXPECT_EQ(std::memcmp(exchange.residual().data(), residual.data(), residual.size() * sizeof(float)), 0);
      }
      EXPECT_GT(world->traffic().bytes_sent, sent_before);
    }
  }
}
