// Tests of two ranks standing for two sites: this rank, and a duplicate of
// the world for the operations tested (their leftovers never meet the
// world's own messages). `between` is MPI_COMM_NULL unless there are two.
#pragma once

#include <mpi.h>

namespace diloco::test {

struct TwoRanks {
  int rank = 0;
  int size = 0;
  MPI_Comm between = MPI_COMM_NULL;
};

inline TwoRanks two_ranks() {
  TwoRanks t;
  MPI_Comm_rank(MPI_COMM_WORLD, &t.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &t.size);
  if (t.size == 2) MPI_Comm_dup(MPI_COMM_WORLD, &t.between);
  return t;
}

}  // namespace diloco::test
