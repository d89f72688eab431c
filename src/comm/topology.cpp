// Site splits (by rank block or by node) and the launcher's environment.
#include "comm/topology.h"

#include <algorithm>
#include <cstdlib>
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
    t.site_of_rank.insert(t.site_of_rank.end(), static_cast<std::size_t>(size), s);
    if (world_rank >= first && world_rank < first + size) {
      t.site = s;
      t.site_rank = world_rank - first;
      t.site_size = size;
    }
    first += size;
  }
  return t;
}

Topology Topology::by_node(int world_rank, const std::vector<std::string>& hosts, int nodes_per_site) {
  const int world_size = static_cast<int>(hosts.size());
  if (world_size < 1 || world_rank < 0 || world_rank >= world_size)
    throw std::invalid_argument("rank " + std::to_string(world_rank) + " outside a world of " +
                                std::to_string(world_size));
  if (nodes_per_site < 1) throw std::invalid_argument("topology.nodes_per_site must be at least 1");
  std::vector<std::string> nodes;  // in order of first appearance
  std::vector<int> site_of(hosts.size());
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    auto it = std::find(nodes.begin(), nodes.end(), hosts[r]);
    if (it == nodes.end()) it = nodes.insert(nodes.end(), hosts[r]);
    site_of[r] = static_cast<int>(it - nodes.begin()) / nodes_per_site;
  }
  return from_sites(world_rank, site_of);
}

Topology Topology::from_sites(int world_rank, const std::vector<int>& site_of) {
  const int world_size = static_cast<int>(site_of.size());
  if (world_size < 1 || world_rank < 0 || world_rank >= world_size)
    throw std::invalid_argument("rank " + std::to_string(world_rank) + " outside a world of " +
                                std::to_string(world_size));
  Topology t;
  t.world_rank = world_rank;
  t.world_size = world_size;
  t.num_sites = *std::max_element(site_of.begin(), site_of.end()) + 1;
  t.site_sizes.assign(static_cast<std::size_t>(t.num_sites), 0);
  t.site_first_rank.assign(static_cast<std::size_t>(t.num_sites), -1);
  for (int r = 0; r < world_size; ++r) {
    const int site = site_of[static_cast<std::size_t>(r)];
    if (site < 0) throw std::invalid_argument("rank " + std::to_string(r) + " has no site");
    const auto s = static_cast<std::size_t>(site);
    if (t.site_first_rank[s] < 0) t.site_first_rank[s] = r;
    t.site_of_rank.push_back(site);
    if (r == world_rank) {
      t.site = site;
      t.site_rank = t.site_sizes[s];
    }
    ++t.site_sizes[s];
  }
  for (int s = 0; s < t.num_sites; ++s)
    if (t.site_sizes[static_cast<std::size_t>(s)] == 0)
      throw std::invalid_argument("site " + std::to_string(s) + " has no rank");
  t.site_size = t.site_sizes[static_cast<std::size_t>(t.site)];
  return t;
}

namespace {

bool read_int(const char* name, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0) return false;
  out = static_cast<int>(n);
  return true;
}

}  // namespace

LaunchInfo discover_launch() {
  LaunchInfo info;
  if (read_int("OMPI_COMM_WORLD_RANK", info.rank)) {
    info.launcher = "mpirun";
    read_int("OMPI_COMM_WORLD_SIZE", info.size);
    read_int("OMPI_COMM_WORLD_LOCAL_RANK", info.local_rank);
    read_int("OMPI_COMM_WORLD_LOCAL_SIZE", info.local_size);
  } else if (read_int("SLURM_PROCID", info.rank)) {
    info.launcher = "srun";
    read_int("SLURM_NTASKS", info.size);
    read_int("SLURM_LOCALID", info.local_rank);
    read_int("SLURM_NTASKS_PER_NODE", info.local_size);
  }
  read_int("SLURM_NODEID", info.node);
  read_int("SLURM_RESTART_COUNT", info.restart_count);
  return info;
}

std::optional<std::pair<int, int>> shared_gpu(const std::vector<std::string>& nodes, const std::vector<int>& devices) {
  const std::size_t n = std::min(nodes.size(), devices.size());
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b)
      if (nodes[a] == nodes[b] && devices[a] == devices[b])
        return std::make_pair(static_cast<int>(a), static_cast<int>(b));
  return std::nullopt;
}

}  // namespace diloco::comm
