// Contiguous-block site split.
#include "comm/topology.h"

#include <stdexcept>
#include <string>

namespace diloco::comm {

Topology Topology::split(int world_rank, int world_size, int num_sites) {
  if (world_size < 1 || world_rank < 0 || world_rank >= world_size)
    throw std::invalid_argument("rank " + std::to_string(world_rank) + " outside a world of " +
                                std::to_string(world_size));
  if (num_sites < 1 || num_sites > world_size)
    throw std::invalid_argument(std::to_string(num_sites) + " sites need between 1 and " +
                                std::to_string(world_size) + " (the number of ranks)");
  Topology t;
  t.world_rank = world_rank;
  t.world_size = world_size;
  t.num_sites = num_sites;
  const int base = world_size / num_sites;
  const int extra = world_size % num_sites;
  int first = 0;
  for (int s = 0; s < num_sites; ++s) {
    const int size = base + (s < extra ? 1 : 0);
    t.site_sizes.push_back(size);
    t.site_first_rank.push_back(first);
    if (world_rank >= first && world_rank < first + size) {
      t.site = s;
      t.site_rank = world_rank - first;
      t.site_size = size;
    }
    first += size;
  }
  return t;
}

}  // namespace diloco::comm
