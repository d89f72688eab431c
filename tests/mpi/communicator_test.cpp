// The MPI communicator on 1-4 real ranks: each collective, element counts 0,
// 1 and odd, and the site split.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>

#include "comm/launch_group.h"
#include "comm/mpi_communicator.h"

using namespace diloco::comm;

TEST(MpiCommunicatorTest, AllReduceSumsForEveryLength) {
  auto world = MpiCommunicator::world();
  const int n = world->size();
  for (std::size_t len : {0u, 1u, 7u, 1001u}) {
    std::vector<float> v(len);
    for (std::size_t i = 0; i < len; ++i) v[i] = static_cast<float>(world->rank() + 1) * static_cast<float>(i % 5);
    world->all_reduce_sum(std::span<float>(v));
    for (std::size_t i = 0; i < len; ++i) ASSERT_EQ(v[i], static_cast<float>(n * (n + 1) / 2 * (i % 5))) << i;
  }
  double d[2] = {1.0, static_cast<double>(world->rank())};
  world->all_reduce_sum(std::span<double>(d, 2));
  EXPECT_EQ(d[0], n);
  EXPECT_EQ(d[1], n * (n - 1) / 2);
}

TEST(MpiCommunicatorTest, AsyncAllReduceCompletesOnWait) {
  auto world = MpiCommunicator::world();
  std::vector<float> v(33, 1.0f);
  auto work = world->all_reduce_sum_async(v);
  work->wait();
  for (float x : v) EXPECT_EQ(x, static_cast<float>(world->size()));
}

TEST(MpiCommunicatorTest, BroadcastFromTheLastRank) {
  auto world = MpiCommunicator::world();
  const int root = world->size() - 1;
  std::vector<float> v(5, static_cast<float>(world->rank()));
  broadcast_values(*world, std::span<float>(v), root);
  for (float x : v) EXPECT_EQ(x, static_cast<float>(root));
  if (world->rank() == root) {
    EXPECT_EQ(world->traffic().bytes_sent, (world->size() - 1) * 5 * sizeof(float));
  }
}

TEST(MpiCommunicatorTest, AllGatherOfVariableLengthsIncludingEmpty) {
  auto world = MpiCommunicator::world();
  std::vector<std::byte> mine(world->rank(), std::byte(world->rank()));
  auto all = world->all_gather(mine);
  ASSERT_EQ(static_cast<int>(all.size()), world->size());
  for (int r = 0; r < world->size(); ++r) {
    ASSERT_EQ(all[r].size(), static_cast<std::size_t>(r));
    for (auto b : all[r]) EXPECT_EQ(b, std::byte(r));
  }
}

TEST(MpiCommunicatorTest, SendRecvAroundARing) {
  auto world = MpiCommunicator::world();
  const int n = world->size();
  if (n == 1) GTEST_SKIP() << "a ring needs two ranks";
  const int next = (world->rank() + 1) % n;
  const int prev = (world->rank() + n - 1) % n;
  std::vector<std::byte> out(3, std::byte(world->rank())), in(3);
  // Even ranks send first so the ring cannot deadlock on synchronous sends.
  if (world->rank() % 2 == 0) {
    world->send(out, next, 7);
    world->recv(in, prev, 7);
  } else {
    world->recv(in, prev, 7);
    world->send(out, next, 7);
  }
  for (auto b : in) EXPECT_EQ(b, std::byte(prev));
}

TEST(SiteCommsTest, SplitMatchesTheTopology) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  for (int sites = 1; sites <= world_size; ++sites) {
    auto comms = make_mpi_site_comms(sites);
    const auto& t = comms.topology;
    EXPECT_EQ(comms.site->size(), t.site_size);
    EXPECT_EQ(comms.site->rank(), t.site_rank);
    if (t.is_leader()) {
      ASSERT_NE(comms.leaders, nullptr);
      EXPECT_EQ(comms.leaders->size(), sites);
      EXPECT_EQ(comms.leaders->rank(), t.site);
    } else {
      EXPECT_EQ(comms.leaders, nullptr);
    }
    // Summing 1 over the site gives its size: the site really is those ranks.
    double one = 1.0;
    comms.site->all_reduce_sum(std::span<double>(&one, 1));
    EXPECT_EQ(one, t.site_size);
  }
  EXPECT_THROW(make_mpi_site_comms(world_size + 1), std::invalid_argument);
}

// The node-local rank comes from MPI's shared-memory split, not from the
// launcher's variables: CTest also runs this with them removed
// (mpi_comm_node_rank), where discover_launch() alone would give 0 everywhere.
TEST(MpiCommunicatorTest, NodeRankFromTheSharedMemorySplit) {
  auto world = MpiCommunicator::world();
  const NodeRank node = node_rank(*world);
  // Every rank of these tests runs on this one machine.
  EXPECT_EQ(node.rank, world->rank());
  EXPECT_EQ(node.size, world->size());
  if (std::getenv("DILOCO_EXPECT_NO_LAUNCHER_LOCAL_RANK")) {
    EXPECT_EQ(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"), nullptr);
    EXPECT_EQ(discover_launch().local_rank, 0);
  }
}

// Launches made of the world's ranks (the first half one launch, the rest
// another; one rank: one launch), placed in the opposite order: the group
// numbers the second launch's ranks first, and its sums, gathers and
// duplicates span both.
TEST(LaunchGroupTest, CollectivesSpanTheLaunchesInPlaceOrder) {
  auto world = MpiCommunicator::world();
  const int n = world->size();
  const int half = (n + 1) / 2;
  const bool first_half = world->rank() < half;
  auto local = world->split(first_half ? 0 : 1, world->rank());
  const int launches = n > 1 ? 2 : 1;
  auto leaders = world->split(local->rank() == 0 && launches > 1 ? 0 : -1, world->rank());
  LaunchGroup group(*local, leaders.get(), first_half ? 1 : 0);
  const int expected = first_half ? (n - half) + world->rank() : world->rank() - half;
  EXPECT_EQ(group.size(), n);
  EXPECT_EQ(group.rank(), launches > 1 ? expected : world->rank());
  EXPECT_EQ(group.launch_first_ranks().size(), static_cast<std::size_t>(launches));

  double v[2] = {1.0, static_cast<double>(group.rank())};
  group.all_reduce_sum(std::span<double>(v, 2));
  EXPECT_EQ(v[0], n);
  EXPECT_EQ(v[1], n * (n - 1) / 2);

  const std::string mine(static_cast<std::size_t>(group.rank()) + 1, static_cast<char>('a' + group.rank()));
  auto dup = group.duplicate();
  const auto all = dup->all_gather(std::as_bytes(std::span<const char>(mine.data(), mine.size())));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(all[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(r) + 1) << r;
    EXPECT_EQ(static_cast<char>(all[static_cast<std::size_t>(r)].front()), static_cast<char>('a' + r)) << r;
  }
  group.barrier();
}
