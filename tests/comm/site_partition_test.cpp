// Sites cut from a measured link graph, the probe's pair rounds, and
// topologies from a site per rank.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "comm/link_probe.h"
#include "comm/site_partition.h"
#include "comm/topology.h"

using namespace diloco::comm;

namespace {

constexpr double kMbit = 1e6 / 8.0;

// n ranks; ranks in the same group share `fast` Mbit/s, others get slow(a, b).
std::vector<std::vector<double>> graph(const std::vector<int>& group, double fast,
                                       const std::function<double(int, int)>& slow) {
  const int n = static_cast<int>(group.size());
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) m[a][b] = (group[a] == group[b] ? fast : slow(std::min(a, b), std::max(a, b))) * kMbit;
  return m;
}

}  // namespace

TEST(SitePartitionTest, PairsOnFastLinksBecomeSitesWithUnevenSlowLinks) {
  // 0-1, 2-3, 4-5 at about 10 Gbit/s (with measuring noise); between the
  // pairs 1 Gbit/s, 100 Mbit/s and 20 Mbit/s.
  const auto m = graph({0, 0, 1, 1, 2, 2}, 10000.0, [](int a, int b) {
    const int x = a / 2, y = b / 2;
    return x == 0 && y == 1 ? 1000.0 : (x == 0 ? 100.0 : 20.0);
  });
  auto noisy = m;
  noisy[2][3] = noisy[3][2] = 6000.0 * kMbit;
  const auto p = partition_by_links(noisy, 4.0);
  EXPECT_EQ(p.num_sites, 3);
  EXPECT_EQ(p.site_of_rank, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_DOUBLE_EQ(p.threshold_bytes_per_s, 6000.0 * kMbit);
  EXPECT_DOUBLE_EQ(p.drop, 6.0);
  EXPECT_NE(p.explanation.find("site 1: ranks 2,3"), std::string::npos) << p.explanation;
}

TEST(SitePartitionTest, SitesAreNumberedByTheirFirstRankWhateverTheOrder) {
  const auto m = graph({0, 1, 0, 2, 1, 2}, 1000.0, [](int, int) { return 10.0; });
  const auto p = partition_by_links(m, 4.0);
  EXPECT_EQ(p.site_of_rank, (std::vector<int>{0, 1, 0, 2, 1, 2}));
}

TEST(SitePartitionTest, NoDropAsLargeAsTheGapMakesOneSite) {
  const auto m = graph({0, 1, 2, 3}, 100.0, [](int a, int b) { return 100.0 + 10.0 * (a + b); });
  const auto p = partition_by_links(m, 4.0);
  EXPECT_EQ(p.num_sites, 1);
  EXPECT_EQ(p.threshold_bytes_per_s, 0.0);
  EXPECT_NE(p.explanation.find("one site"), std::string::npos);
}

TEST(SitePartitionTest, UnmeasurablyFastLinksCountAsTheFastest) {
  // 0 bytes/s: a transfer faster than the probe could time.
  const auto m = graph({0, 0, 1, 1}, 0.0, [](int, int) { return 50.0; });
  const auto p = partition_by_links(m, 4.0);
  EXPECT_EQ(p.site_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(std::isinf(p.drop));
}

TEST(SitePartitionTest, AChainOfFastLinksJoinsASiteAndSaysSo) {
  auto m = graph({0, 0, 0, 1}, 1000.0, [](int, int) { return 10.0; });
  m[0][2] = m[2][0] = 10.0 * kMbit;  // 0-1 and 1-2 fast, 0-2 slow
  const auto p = partition_by_links(m, 4.0);
  EXPECT_EQ(p.site_of_rank, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_NE(p.explanation.find("joined only through others"), std::string::npos) << p.explanation;
}

TEST(SitePartitionTest, RefusesBadMatricesAndGaps) {
  EXPECT_THROW(partition_by_links({{0, 1}, {1}}, 4.0), std::invalid_argument);
  EXPECT_THROW(partition_by_links({{0, -1}, {-1, 0}}, 4.0), std::invalid_argument);
  EXPECT_THROW(partition_by_links({{0, 1}, {1, 0}}, 0.5), std::invalid_argument);
}

TEST(PairRoundsTest, EveryPairOnceAndEveryRankAtMostOncePerRound) {
  for (int n = 1; n <= 9; ++n) {
    const auto rounds = pair_rounds(n);
    std::set<std::pair<int, int>> pairs;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "n " << n;
        EXPECT_TRUE(pairs.insert({a, b}).second) << "n " << n;
      }
    }
    EXPECT_EQ(static_cast<int>(pairs.size()), n * (n - 1) / 2) << "n " << n;
    EXPECT_LE(static_cast<int>(rounds.size()), n - 1 + n % 2);
  }
}

TEST(TopologyTest, FromSitesKeepsWorldOrderInsideEachSite) {
  const auto t = Topology::from_sites(3, {0, 1, 0, 1, 2});
  EXPECT_EQ(t.num_sites, 3);
  EXPECT_EQ(t.site, 1);
  EXPECT_EQ(t.site_rank, 1);
  EXPECT_EQ(t.site_first_rank, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(t.site_sizes, (std::vector<int>{2, 2, 1}));
  EXPECT_THROW(Topology::from_sites(0, {0, 2}), std::invalid_argument);  // site 1 empty
  EXPECT_THROW(Topology::from_sites(0, {0, -1}), std::invalid_argument);
}
