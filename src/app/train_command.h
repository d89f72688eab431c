// `diloco train`: runs a recipe under MPI (mpirun or srun launch every rank).
#pragma once

#include <string>

#include "app/recipe.h"
#include "inner/corpus.h"

namespace diloco::app {

// Returns the process exit code. Errors every rank sees alike (bad recipe for
// this world size, missing data) end all ranks cleanly with 2; an error seen by
// one rank aborts the whole job so no peer waits forever.
// `resume` is "none", "auto" (newest checkpoint that verifies, falling back to
// older ones) or a checkpoint folder.
int run_train(const Recipe& recipe, const std::string& resume, int* argc, char*** argv);

// The recipe's corpus, as train reads it; throws inner::DataError naming the
// path when it is missing, unreadable or holds no usable text. `diloco check`
// calls it so a user learns of bad data before queueing a job.
inner::Corpus load_corpus(const Recipe& recipe);

}  // namespace diloco::app
