// How a run continues from its checkpoints: which one to resume from (agreed
// by every rank), the abandoned future set aside, the metrics file cut back.
#pragma once

#include <string>

#include "app/recipe.h"
#include "comm/communicator.h"

namespace diloco::app {

// Rank 0 picks the checkpoint for `resume` (auto | none | a folder) and every
// rank learns it; "" starts fresh. `auto` skips, with a warning, checkpoints
// that fail their checksums or whose files do not parse. Throws
// outer::CheckpointError (on every rank) for an unusable named checkpoint.
std::string choose_resume(const Recipe& recipe, const std::string& resume, comm::Communicator& world);

// Rank 0 moves checkpoints newer than `round` (0: a fresh start) aside, so
// neither pruning nor a later --resume auto mistakes them for this run's, and
// says where they went. Collective; throws outer::CheckpointError on every
// rank if rank 0 could not.
void set_aside_abandoned(const Recipe& recipe, int round, comm::Communicator& world);

// Keeps the metrics rows up to `round`: rows a crashed run wrote after its
// last checkpoint are replaced by the resumed run's. A row that does not
// parse (torn by a crash while it was written) is dropped with a warning.
// The file is rewritten whole through a temporary file and a rename.
void trim_metrics(const std::string& path, int round);

}  // namespace diloco::app
