// The exchange channel of sites launched apart: a comm thread's duplicate of
// the leaders' communicator (MpiCommunicator::timed_duplicate, follow). Two
// ranks: its waits give up at the parent's deadline, on an alarm sent on the
// parent (where members send them), and at once when abandoned from another
// thread; after follow() it carries messages again.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "comm/comm_error.h"
#include "comm/mpi_communicator.h"
#include "two_ranks.h"

using namespace diloco::comm;

namespace {
constexpr int kAlarmTag = 99, kTag = 5, kStepTag = 6;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Both ranks meet here (on the world, never on the communicators tested).
void meet() { MPI_Barrier(MPI_COMM_WORLD); }
}  // namespace

TEST(ExchangeChannelTest, GivesUpAtTheDeadlineOnAnAlarmAndWhenAbandonedThenFollows) {
  const auto [rank, size, between] = diloco::test::two_ranks();
  if (size != 2) GTEST_SKIP() << "two ranks";
  MpiCommunicator leaders(between);
  leaders.set_deadline(1.0, kAlarmTag);
  auto channel = MpiCommunicator::timed_duplicate(leaders);
  ASSERT_EQ(channel->size(), 2);
  std::vector<std::byte> buffer(16);

  // Nobody sends: the wait gives up at the parent's deadline.
  if (rank == 0) {
    const auto t0 = Clock::now();
    EXPECT_THROW(channel->recv(buffer, 1, kTag), PeerLost);
    EXPECT_GE(since(t0), 0.9);
    EXPECT_LT(since(t0), 5.0);
  }
  meet();

  // An alarm sent on the parent ends a wait on the channel well before its deadline.
  leaders.set_deadline(30.0, kAlarmTag);
  channel->follow(leaders, true);
  if (rank == 0) {
    const auto t0 = Clock::now();
    EXPECT_THROW(channel->recv(buffer, 1, kTag), PeerLost);
    EXPECT_LT(since(t0), 10.0);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int alarm = 1;
    MPI_Send(&alarm, 1, MPI_INT, 0, kAlarmTag, leaders.handle());
  }
  meet();
  if (rank == 0) {  // the alarm is the recovery's to take; here it is taken so the next step starts clean
    int alarm = 0;
    MPI_Recv(&alarm, 1, MPI_INT, 1, kAlarmTag, leaders.handle(), MPI_STATUS_IGNORE);
  }
  meet();

  // Abandoned from another thread: the wait ends at once.
  if (rank == 0) {
    const auto t0 = Clock::now();
    auto waiting = std::async(std::launch::async, [&] { channel->recv(buffer, 1, kTag); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    channel->abandon_waits();
    EXPECT_THROW(waiting.get(), PeerLost);
    EXPECT_LT(since(t0), 10.0);
    // Abandoned waits stay abandoned until the channel follows the parent again.
    EXPECT_THROW(channel->recv(buffer, 1, kTag), PeerLost);
  }
  meet();

  // After follow() it carries messages between the members again.
  channel->follow(leaders, false);
  if (rank == 0) {
    channel->recv(buffer, 1, kStepTag);
    EXPECT_EQ(buffer[3], std::byte{42});
  } else {
    std::vector<std::byte> message(16, std::byte{42});
    channel->send(message, 0, kStepTag);
  }
  meet();
}
