// The MPI cut of a launch into sites: the site and leader communicators,
// and what ranks learn about their nodes.
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"

namespace diloco::comm {

SiteComms make_mpi_site_comms(int num_sites) {
  int rank = 0, size = 1;
  DILOCO_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DILOCO_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return make_mpi_site_comms(Topology::split(rank, size, num_sites));
}

NodeRank node_rank(const MpiCommunicator& comm) {
  MPI_Comm shared = MPI_COMM_NULL;
  DILOCO_MPI_CHECK(MPI_Comm_split_type(comm.handle(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &shared));
  NodeRank out;
  DILOCO_MPI_CHECK(MPI_Comm_rank(shared, &out.rank));
  DILOCO_MPI_CHECK(MPI_Comm_size(shared, &out.size));
  DILOCO_MPI_CHECK(MPI_Comm_free(&shared));
  return out;
}

std::string node_name() {
  if (const char* name = std::getenv("DILOCO_NODE_NAME"); name && *name) return name;
  char buf[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0;
  DILOCO_MPI_CHECK(MPI_Get_processor_name(buf, &length));
  return std::string(buf, static_cast<std::size_t>(length));
}

std::vector<std::string> gather_node_names(Communicator& world) {
  const std::string mine = node_name();
  auto raw = world.all_gather(std::as_bytes(std::span<const char>(mine.data(), mine.size())));
  std::vector<std::string> names;
  for (const auto& r : raw) names.emplace_back(reinterpret_cast<const char*>(r.data()), r.size());
  return names;
}

SiteComms make_mpi_site_comms(const Topology& topology) {
  auto world = MpiCommunicator::world();
  SiteComms comms;
  comms.topology = topology;
  const Topology& t = comms.topology;
  comms.site = world->split(t.site, t.site_rank);
  comms.leaders = world->split(t.is_leader() ? 0 : -1, t.site);
  comms.world = std::move(world);
  return comms;
}

}  // namespace diloco::comm
