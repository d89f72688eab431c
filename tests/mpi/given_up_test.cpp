// Operations between sites that a deadline gave up (PeerLost) stay with the
// transport: when the lost peer wakes (a SIGSTOP'd leader resumed), MPI goes
// on reading what was to be sent and writing what arrives. Two ranks: rank 0
// waits with a deadline while rank 1 is "frozen" (it posts nothing), gives up
// a send, an all-reduce and a receive, and reuses the buffers it passed;
// rank 1 then wakes and completes its side of each. What rank 1 gets must be
// what rank 0 sent, and nothing may land in rank 0's reused buffers.
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/comm_error.h"
#include "comm/mpi_communicator.h"
#include "comm/operation_buffers.h"
#include "two_ranks.h"

using namespace diloco::comm;

namespace {
constexpr int kSendTag = 5, kReceiveTag = 6, kAlarmTag = 99, kWakeTag = 7, kDoneTag = 8;
constexpr std::size_t kBytes = std::size_t{4} << 20;  // past every transport's eager limit
constexpr std::size_t kFloats = std::size_t{1} << 20;
}  // namespace

TEST(GivenUpTest, OperationsGivenUpKeepTheirOwnBuffers) {
  const auto [rank, size, between] = diloco::test::two_ranks();
  if (size != 2) GTEST_SKIP() << "two ranks";
  MpiCommunicator sites(between);
  int signal = 0;
  if (rank == 0) {
    sites.set_deadline(0.5, kAlarmTag);
    std::vector<std::byte> out(kBytes, std::byte{0x5a});
    EXPECT_THROW(sites.send(out, 1, kSendTag), PeerLost);
    std::fill(out.begin(), out.end(), std::byte{0xee});  // its caller reuses it
    std::vector<float> sum(kFloats, 1.0f);
    EXPECT_THROW(sites.all_reduce_sum(std::span<float>(sum)), PeerLost);
    std::fill(sum.begin(), sum.end(), -7.0f);
    std::vector<std::byte> in(kBytes, std::byte{0x11});
    EXPECT_THROW(sites.recv(in, 1, kReceiveTag), PeerLost);
    EXPECT_GE(OperationBuffers::kept_bytes(), 2 * kBytes + kFloats * sizeof(float));
    // Wake rank 1 and keep the transport going (a blocking receive
    // progresses every request) until it has done its side of all three.
    MPI_Send(&signal, 1, MPI_INT, 1, kWakeTag, MPI_COMM_WORLD);
    MPI_Recv(&signal, 1, MPI_INT, 1, kDoneTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT_TRUE(std::all_of(sum.begin(), sum.end(), [](float x) { return x == -7.0f; }))
        << "the all-reduce given up wrote its result into the caller's reused buffer";
    EXPECT_TRUE(std::all_of(in.begin(), in.end(), [](std::byte b) { return b == std::byte{0x11}; }))
        << "the receive given up wrote into the caller's reused buffer";
  } else {
    MPI_Recv(&signal, 1, MPI_INT, 0, kWakeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);  // frozen until now
    std::vector<std::byte> got(kBytes);
    ASSERT_EQ(MPI_Recv(got.data(), static_cast<int>(kBytes), MPI_BYTE, 0, kSendTag, between, MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    EXPECT_EQ(std::count(got.begin(), got.end(), std::byte{0x5a}), static_cast<long>(kBytes))
        << "the send given up sent what its caller wrote afterwards";
    std::vector<float> sum(kFloats, 2.0f);
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(kFloats), MPI_FLOAT, MPI_SUM, between, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    EXPECT_TRUE(std::all_of(sum.begin(), sum.end(), [](float x) { return x == 3.0f; }))
        << "the all-reduce given up contributed what its caller wrote afterwards";
    std::vector<std::byte> reply(kBytes, std::byte{0x77});
    MPI_Send(reply.data(), static_cast<int>(kBytes), MPI_BYTE, 0, kReceiveTag, between);
    MPI_Send(&signal, 1, MPI_INT, 0, kDoneTag, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
