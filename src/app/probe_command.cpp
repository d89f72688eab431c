// Link probing: the site split of `train`, the same emulated links, then
// pairwise ping-pong and bulk transfers between site leaders.
#include "app/probe_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "comm/link_probe.h"
#include "app/metrics_log.h"
#include "comm/mpi_communicator.h"

namespace diloco::app {

int run_probe(const Recipe& recipe, int* argc, char*** argv) {
  comm::MpiSession mpi(argc, argv);
  const bool root = mpi.world_rank() == 0;
  if (recipe.topology.sites > mpi.world_size()) {
    if (root)
      std::cerr << "diloco: error: topology.sites = " << recipe.topology.sites
                << " needs at least that many ranks; this job has " << mpi.world_size() << std::endl;
    return 2;
  }
  try {
    auto comms = comm::make_mpi_site_comms(recipe.topology.sites);
    if (const auto links = recipe.links.emulator(); links && comms.leaders)
      comms.leaders = std::make_unique<comm::EmulatedCommunicator>(std::move(comms.leaders), links);
    std::vector<std::vector<comm::LinkEstimate>> matrix;
    if (comms.leaders) matrix = comm::probe_links(*comms.leaders);
    comms.world->barrier();
    if (!root) return 0;
    const int n = recipe.topology.sites;
    std::printf("links between site leaders: latency ms / bandwidth Mbit/s (alpha + S/beta)\n%6s", "");
    for (int b = 0; b < n; ++b) std::printf(" %18s", ("site " + std::to_string(b)).c_str());
    std::printf("\n");
    for (int a = 0; a < n; ++a) {
      std::printf("site %-2d", a);
      for (int b = 0; b < n; ++b) {
        if (a == b) {
          std::printf(" %18s", "-");
          continue;
        }
        const auto& e = matrix[a][b];
        const double mbps = e.bandwidth_bytes_per_s * 8.0 / 1e6;
        std::printf(" %8.2f / %-8.2f", e.latency_s * 1e3, mbps);
      }
      std::printf("\n");
    }
    std::filesystem::create_directories(recipe.run.out_dir);
    const std::string path = recipe.run.out_dir + "/links.json";
    std::ofstream(path) << "{\"sites\":" << n << ",\"links\":" << link_pairs_json(matrix) << "}\n";
    std::printf("written to %s\n", path.c_str());
    return 0;
  } catch (const comm::CommError& e) {
    std::cerr << "diloco: communication error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  }
}

}  // namespace diloco::app
