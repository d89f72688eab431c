// Link probing: the site split of `train`, the same emulated links, then
// pairwise ping-pong and bulk transfers between site leaders.
#include "app/probe_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "comm/link_probe.h"
#include "app/metrics_log.h"
#include "app/sites.h"
#include "comm/mpi_communicator.h"

namespace diloco::app {

int run_probe(const Recipe& recipe, int* argc, char*** argv) {
  comm::MpiSession mpi(argc, argv);
  const bool root = mpi.world_rank() == 0;
  try {
    comm::SiteComms comms;
    try {
      comms = make_sites(recipe, recipe.links.emulator());
    } catch (const RecipeError& e) {
      if (root) std::cerr << "diloco: error: " << e.what() << std::endl;
      return 2;
    }
    std::vector<std::vector<comm::LinkEstimate>> matrix;
    if (comms.leaders) matrix = comm::probe_links(*comms.leaders);
    comms.world->barrier();
    if (!root) return 0;
    const int n = comms.topology.num_sites;
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
    nlohmann::ordered_json file;
    file["sites"] = n;
    file["links"] = link_pairs_json(matrix);
    std::ofstream(path) << file.dump() << "\n";
    std::printf("written to %s\n", path.c_str());
    return 0;
  } catch (const comm::CommError& e) {
    std::cerr << "diloco: communication error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  }
}

}  // namespace diloco::app
