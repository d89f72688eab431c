// Site split: contiguous blocks, extra ranks to the first sites, leaders.
#include <gtest/gtest.h>

#include <stdexcept>

#include "comm/topology.h"

using diloco::comm::Topology;

TEST(TopologyTest, EqualSitesAreContiguousBlocks) {
  for (int r = 0; r < 4; ++r) {
    auto t = Topology::split(r, 4, 2);
    EXPECT_EQ(t.site, r / 2);
    EXPECT_EQ(t.site_rank, r % 2);
    EXPECT_EQ(t.site_size, 2);
    EXPECT_EQ(t.is_leader(), r % 2 == 0);
    EXPECT_EQ(t.site_first_rank, (std::vector<int>{0, 2}));
  }
}

TEST(TopologyTest, UnequalSitesGiveExtraRanksToTheFirstSites) {
  EXPECT_EQ(Topology::split(0, 3, 2).site_sizes, (std::vector<int>{2, 1}));
  auto last = Topology::split(2, 3, 2);
  EXPECT_EQ(last.site, 1);
  EXPECT_EQ(last.site_rank, 0);
  EXPECT_TRUE(last.is_leader());
  EXPECT_EQ(Topology::split(4, 7, 3).site_sizes, (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(Topology::split(4, 7, 3).site, 1);
}

TEST(TopologyTest, OneSiteAndOneRankPerSite) {
  auto one = Topology::split(2, 3, 1);
  EXPECT_EQ(one.site, 0);
  EXPECT_EQ(one.site_rank, 2);
  auto each = Topology::split(2, 3, 3);
  EXPECT_EQ(each.site, 2);
  EXPECT_TRUE(each.is_leader());
}

TEST(TopologyTest, RejectsMoreSitesThanRanksOrBadRanks) {
  EXPECT_THROW(Topology::split(0, 2, 3), std::invalid_argument);
  EXPECT_THROW(Topology::split(0, 2, 0), std::invalid_argument);
  EXPECT_THROW(Topology::split(2, 2, 1), std::invalid_argument);
}
