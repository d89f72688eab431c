// Which backend carries a site's per-step gradient all-reduce: MPI (host
// memory, any device) or NCCL (device memory, CUDA only), and the NCCL
// communicator's factory, which exists whether or not NCCL was compiled in.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace diloco::comm {

enum class IntraSiteSetting { kAuto, kMpi, kNccl };
enum class IntraSiteBackend { kMpi, kNccl };

// True when this build has the NCCL backend (CUDA toolkit and NCCL found).
bool nccl_built();

// The backend for `setting` (recipe key comm.intra_site): auto picks NCCL on
// CUDA when it was built, MPI otherwise. Throws std::invalid_argument naming
// the problem when NCCL is asked for and cannot serve (not built, or the
// inner steps run on the CPU, where NCCL has no device memory to work on).
IntraSiteBackend choose_intra_site(IntraSiteSetting setting, bool on_cuda, bool nccl_available);

const char* to_string(IntraSiteBackend backend);

// An NCCL unique id (NCCL_UNIQUE_ID_BYTES), made by rank 0 of `bootstrap` and
// broadcast over it, so every rank of the site ends up with rank 0's. Needs
// no GPU. Throws CommError when NCCL was not built or fails.
using NcclIdBytes = std::array<char, 128>;
NcclIdBytes share_nccl_id(Communicator& bootstrap);

// NCCL communicator over the ranks of `bootstrap` (a site's MPI
// communicator, which must outlive it), on CUDA device `device`, running on
// `cuda_stream` (a cudaStream_t; nullptr: the default stream). Every span
// passed to it is device memory. Collective over `bootstrap`; every blocking
// call, its initialization included, is timed by `watchdog`. Throws
// CommError when NCCL was not built or cannot start.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device, void* cuda_stream,
                                                     Watchdog* watchdog);

}  // namespace diloco::comm
