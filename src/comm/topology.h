// How the world is cut into sites (contiguous rank blocks, or the nodes the
// ranks run on), one leader per site, and the communicators that go with it.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <string>
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
  std::vector<int> site_of_rank;    // every world rank's site

  bool is_leader() const { return site_rank == 0; }

  // Throws std::invalid_argument unless 1 <= num_sites <= world_size.
  static Topology split(int world_rank, int world_size, int num_sites);

  // Every `nodes_per_site` nodes form a site: `hosts[r]` names rank r's node;
  // nodes are numbered by their first rank, sites likewise, and within a
  // site ranks keep their world order. Throws std::invalid_argument for an
  // empty host list or nodes_per_site < 1.
  static Topology by_node(int world_rank, const std::vector<std::string>& hosts, int nodes_per_site);

  // Rank r in site site_of_rank[r]: sites numbered 0..S-1 with none empty;
  // within a site ranks keep their world order, its first rank leads.
  // Throws std::invalid_argument otherwise.
  static Topology from_sites(int world_rank, const std::vector<int>& site_of_rank);
};

// Two ranks that would drive one GPU: the first pair (indices into the
// lists, which give every rank's node and device) on the same node with the
// same device; nullopt when each rank has its own. NCCL refuses such a
// communicator ("Duplicate GPU detected").
std::optional<std::pair<int, int>> shared_gpu(const std::vector<std::string>& nodes, const std::vector<int>& devices);

// How a launcher started this process, from its environment: Open MPI's
// mpirun (OMPI_COMM_WORLD_*) or Slurm's srun (SLURM_PROCID, SLURM_LOCALID,
// SLURM_NODEID, SLURM_NTASKS); a job under mpirun inside a Slurm allocation
// reports mpirun. Local rank picks a GPU; the restart count shows a requeue.
struct LaunchInfo {
  std::string launcher = "none";  // "mpirun", "srun" or "none"
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node = -1;                  // Slurm's node index, -1 when unknown
  int restart_count = 0;          // SLURM_RESTART_COUNT: how often the job was requeued
};

// Reads the environment; a variable that is present but not a number is ignored.
LaunchInfo discover_launch();

// The communicators a rank uses: the whole world, its own site, and (on site
// leaders only; nullptr elsewhere) the leaders of all sites.
struct SiteComms {
  Topology topology;
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> site;
  std::unique_ptr<Communicator> leaders;
  // Sites launched apart with an overlapped exchange: the comm thread's
  // communicator between leaders, kept in step with `leaders` by the
  // membership (a trainer takes it; otherwise it duplicates `leaders`).
  std::unique_ptr<Communicator> exchange_channel;
};

}  // namespace diloco::comm
