// topology.site_by: "block" splits ranks into topology.sites contiguous blocks;
// "node" makes every topology.nodes_per_site nodes a site.
#include "app/sites.h"

#include <string>

namespace diloco::app {

comm::SiteComms make_sites(const Recipe& recipe, std::shared_ptr<comm::LinkEmulator> links) {
  auto world = comm::MpiCommunicator::world();
  const auto& t = recipe.topology;
  comm::Topology topo;
  if (t.site_by == "node") {
    topo = comm::Topology::by_node(world->rank(), comm::gather_node_names(*world), t.nodes_per_site);
    if (t.sites_given && topo.num_sites != t.sites)
      throw RecipeError("topology.sites = " + std::to_string(t.sites) + " but topology.site_by = \"node\" finds " +
                        std::to_string(topo.num_sites) + " sites on this launch (" +
                        std::to_string(t.nodes_per_site) + " nodes per site); leave topology.sites out to take them");
  } else {
    if (t.sites > world->size())
      throw RecipeError("topology.sites = " + std::to_string(t.sites) +
                        " needs at least that many ranks; this job has " + std::to_string(world->size()) +
                        " (launch with mpirun -np N)");
    topo = comm::Topology::split(world->rank(), world->size(), t.sites);
  }
  if (links && links->sites() != topo.num_sites)
    throw RecipeError("links describe " + std::to_string(links->sites()) + " sites; this launch has " +
                      std::to_string(topo.num_sites));
  auto comms = comm::make_mpi_site_comms(topo);
  // Emulated wide-area links sit between the site leaders only.
  if (links && comms.leaders)
    comms.leaders = std::make_unique<comm::EmulatedCommunicator>(std::move(comms.leaders), std::move(links));
  return comms;
}

}  // namespace diloco::app
