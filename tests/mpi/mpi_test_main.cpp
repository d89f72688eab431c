// main() for multi-rank GoogleTest programs: MPI up first, results from every
// rank; the exit code is non-zero on a rank whose tests failed, so mpirun fails.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/mpi_communicator.h"

int main(int argc, char** argv) {
  diloco::comm::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  // Every rank learns whether any rank failed, so all exit alike.
  int any = failed ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && !failed) std::fprintf(stderr, "rank %d: tests passed here but failed on another rank\n", mpi.world_rank());
  return any;
}
