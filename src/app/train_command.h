// `diloco train`: runs a recipe under MPI (mpirun or srun launch every rank).
#pragma once

#include <string>

#include "app/recipe.h"
#include "inner/data/dataset.h"

namespace diloco::app {

// Returns the process exit code. Errors every rank sees alike (bad recipe for
// this world size, missing data) end all ranks cleanly with 2; an error seen by
// one rank aborts the whole job so no peer waits forever.
// `resume` is "none", "auto" (newest checkpoint that verifies, falling back to
// older ones) or a checkpoint folder.
int run_train(const Recipe& recipe, const std::string& resume, int* argc, char*** argv);

// The recipe's data, as train opens it (ids checked against model.vocab on a
// sample; every id when `full_scan`); throws inner::DataError naming the file
// (and offset) at fault. `diloco check` calls it with a full scan so a user
// learns of bad data before queueing a job.
inner::Dataset load_dataset(const Recipe& recipe, bool full_scan = false);

}  // namespace diloco::app
