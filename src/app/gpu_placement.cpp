#include "app/gpu_placement.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace diloco::app {

comm::IntraSiteBackend confirm_one_gpu_per_rank(comm::Communicator& site, int site_index,
                                                const inner::DeviceConfig& device, comm::IntraSiteSetting setting,
                                                comm::IntraSiteBackend chosen) {
  // Every rank takes part, whatever it chose, so the collectives match.
  const auto nodes = comm::gather_node_names(site);
  std::vector<double> devices(static_cast<std::size_t>(site.size()), 0.0);
  devices[static_cast<std::size_t>(site.rank())] = device.cuda ? device.index + 1.0 : 0.0;
  site.all_reduce_sum(std::span<double>(devices));
  if (chosen != comm::IntraSiteBackend::kNccl) return chosen;
  std::vector<int> gpus;
  for (double d : devices) gpus.push_back(static_cast<int>(d) - 1);
  const auto shared = comm::shared_gpu(nodes, gpus);
  if (!shared) return chosen;
  const auto [a, b] = *shared;
  const std::string what = "ranks " + std::to_string(a) + " and " + std::to_string(b) + " of site " +
                           std::to_string(site_index) + " would share GPU " +
                           std::to_string(gpus[static_cast<std::size_t>(a)]) + " on " +
                           nodes[static_cast<std::size_t>(a)];
  if (setting == comm::IntraSiteSetting::kNccl)
    throw std::invalid_argument("comm.intra_site = \"nccl\": " + what +
                                "; NCCL needs one GPU per rank (start at most one rank per GPU, or use "
                                "comm.intra_site = \"mpi\")");
  if (site.rank() == 0)
    std::fprintf(stderr, "diloco: %s; this site's gradients go over MPI, not NCCL (comm.intra_site = \"auto\")\n",
                 what.c_str());
  return comm::IntraSiteBackend::kMpi;
}

}  // namespace diloco::app
