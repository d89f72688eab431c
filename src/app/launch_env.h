// What the launcher (mpirun, srun) tells a process through its environment,
// read before MPI starts.
#pragma once

#include <cstdlib>
#include <string>

namespace diloco::app {

// Whether this process is the launcher's rank 0 (or was started alone):
// input errors print there only, so a bad flag under mpirun gives one message.
inline bool is_launch_root() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var)) return std::string(v) == "0";
  }
  return true;
}

// Whether an MPI launcher started this process (so MPI may be initialized
// without becoming a singleton job).
inline bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(var)) return true;
  return false;
}

}  // namespace diloco::app
