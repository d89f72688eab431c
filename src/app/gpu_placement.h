// Which GPU a rank drives, and whether its site's gradients can go over NCCL
// with the GPUs the ranks ended up on.
#pragma once

#include "comm/intra_site.h"
#include "comm/mpi_communicator.h"
#include "inner/inner_loop.h"

namespace diloco::app {

// NCCL needs a GPU of its own for every rank of a communicator (more ranks
// per node than GPUs share them). Collective over `site` (the ranks of site
// `site_index`): gathers every rank's node and GPU. Returns the backend to
// use: `chosen` when no two ranks share a GPU; MPI when they do and the
// setting was auto (saying so on stderr); with the setting nccl, throws
// std::invalid_argument naming the ranks, the GPU and the node.
comm::IntraSiteBackend confirm_one_gpu_per_rank(comm::Communicator& site, int site_index,
                                                const inner::DeviceConfig& device, comm::IntraSiteSetting setting,
                                                comm::IntraSiteBackend chosen);

}  // namespace diloco::app
