// Site split: contiguous blocks, extra ranks to the first sites, leaders.
#include <gtest/gtest.h>

#include <cstdlib>
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

TEST(TopologyTest, ByNodeGroupsRanksOfTheSameHosts) {
  // Ranks placed round-robin over 3 nodes, 2 nodes per site: sites {a, b}, {c}.
  const std::vector<std::string> hosts{"a", "b", "c", "a", "b", "c"};
  const auto t0 = Topology::by_node(0, hosts, 2);
  EXPECT_EQ(t0.num_sites, 2);
  EXPECT_EQ(t0.site_sizes, (std::vector<int>{4, 2}));
  EXPECT_EQ(t0.site_first_rank, (std::vector<int>{0, 2}));
  const auto t4 = Topology::by_node(4, hosts, 2);  // on b: site 0, fourth of its ranks 0, 1, 3, 4
  EXPECT_EQ(t4.site, 0);
  EXPECT_EQ(t4.site_rank, 3);
  const auto t5 = Topology::by_node(5, hosts, 2);
  EXPECT_EQ(t5.site, 1);
  EXPECT_EQ(t5.site_rank, 1);
  EXPECT_FALSE(t5.is_leader());
  EXPECT_TRUE(Topology::by_node(2, hosts, 2).is_leader());
  EXPECT_EQ(Topology::by_node(0, hosts, 1).num_sites, 3);
  EXPECT_THROW(Topology::by_node(0, hosts, 0), std::invalid_argument);
}

TEST(LaunchInfoTest, ReadsOpenMpiThenSlurm) {
  ::setenv("SLURM_PROCID", "5", 1);
  ::setenv("SLURM_NTASKS", "8", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_NODEID", "2", 1);
  ::setenv("SLURM_RESTART_COUNT", "3", 1);
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  auto srun = diloco::comm::discover_launch();
  EXPECT_EQ(srun.launcher, "srun");
  EXPECT_EQ(srun.rank, 5);
  EXPECT_EQ(srun.size, 8);
  EXPECT_EQ(srun.local_rank, 1);
  EXPECT_EQ(srun.node, 2);
  EXPECT_EQ(srun.restart_count, 3);
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);  // mpirun inside an allocation wins
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  EXPECT_EQ(diloco::comm::discover_launch().launcher, "mpirun");
  EXPECT_EQ(diloco::comm::discover_launch().size, 2);
  for (const char* v : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_RESTART_COUNT",
                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"})
    ::unsetenv(v);
}

// Faked device lists: the first pair of ranks on one node with one device.
TEST(SharedGpuTest, FindsTwoRanksOnOneGpuOfOneNode) {
  using diloco::comm::shared_gpu;
  EXPECT_FALSE(shared_gpu({"a", "a", "b", "b"}, {0, 1, 0, 1}));
  EXPECT_FALSE(shared_gpu({}, {}));
  EXPECT_EQ(shared_gpu({"a", "a", "a"}, {0, 1, 0}), std::make_pair(0, 2));
  EXPECT_EQ(shared_gpu({"a", "b", "c", "b"}, {0, 0, 1, 0}), std::make_pair(1, 3));
  // Every rank got GPU 0 (the launcher said nothing about local ranks).
  EXPECT_EQ(shared_gpu({"n1", "n1"}, {0, 0}), std::make_pair(0, 1));
}
