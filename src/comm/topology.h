// How the world is cut into sites: contiguous rank blocks, one leader per site,
// and the communicators that go with that cut.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace diloco::comm {

// Where one rank sits. Ranks are split into `num_sites` contiguous blocks; the
// first (world % sites) blocks get one extra rank, so 3 ranks in 2 sites is 2+1.
struct Topology {
  int world_rank = 0;
  int world_size = 1;
  int num_sites = 1;
  int site = 0;
  int site_rank = 0;
  int site_size = 1;
  std::vector<int> site_sizes;      // ranks per site
  std::vector<int> site_first_rank; // world rank of each site's leader

  bool is_leader() const { return site_rank == 0; }

  // Throws std::invalid_argument unless 1 <= num_sites <= world_size.
  static Topology split(int world_rank, int world_size, int num_sites);
};

// The communicators a rank uses: the whole world, its own site, and (on site
// leaders only; nullptr elsewhere) the leaders of all sites.
struct SiteComms {
  Topology topology;
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> site;
  std::unique_ptr<Communicator> leaders;
};

}  // namespace diloco::comm
