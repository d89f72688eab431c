// topology.site_by: "block" splits ranks into topology.sites contiguous blocks;
// "node" makes every topology.nodes_per_site nodes a site; "links" cuts the
// measured link graph where bandwidth first drops by topology.link_gap.
#include "app/sites.h"

#include <iostream>
#include <string>

#include "comm/link_probe.h"
#include "comm/site_partition.h"
#include "plan/input_error.h"
#include "plan/measure/cluster_file.h"

namespace diloco::app {
namespace {

// Short enough for a launch: about 1.5 s per round of pairs on a 20 Mbit/s
// link, a round per rank.
comm::ProbeOptions launch_probe() {
  comm::ProbeOptions o;
  o.pings = 5;
  o.transfers = 3;
  o.large_bytes = std::size_t{512} << 10;
  o.pair_seconds = 1.0;
  return o;
}

comm::Topology topology_by_links(const TopologyConfig& t, comm::Communicator& world) {
  std::vector<std::vector<double>> bandwidth;
  std::string source;
  if (!t.cluster.empty()) {
    plan::Cluster cluster;
    try {
      cluster = plan::read_cluster(t.cluster);  // every rank reads it, so all reach the same verdict
    } catch (const plan::InputError& e) {
      throw RecipeError(e.what());
    }
    if (static_cast<int>(cluster.nodes.size()) != world.size())
      throw RecipeError("topology.cluster " + t.cluster + " describes " + std::to_string(cluster.nodes.size()) +
                        " ranks; this launch has " + std::to_string(world.size()));
    bandwidth = plan::bandwidth_matrix(cluster.links);
    source = "from " + t.cluster;
  } else {
    bandwidth = plan::bandwidth_matrix(comm::probe_links(world, launch_probe()));  // the same matrix on every rank
    source = "measured at launch between all " + std::to_string(world.size()) + " ranks";
  }
  const auto p = comm::partition_by_links(bandwidth, t.link_gap);
  if (world.rank() == 0) std::cerr << "diloco: sites by links (" << source << "):\n" << p.explanation;
  if (t.sites_given && p.num_sites != t.sites)
    throw RecipeError("topology.sites = " + std::to_string(t.sites) + " but topology.site_by = \"links\" finds " +
                      std::to_string(p.num_sites) + " sites (" + source + ", the cut printed above); leave "
                      "topology.sites out to take them, or change topology.link_gap");
  return comm::Topology::from_sites(world.rank(), p.site_of_rank);
}

}  // namespace

comm::SiteComms make_sites(const Recipe& recipe, std::shared_ptr<comm::LinkEmulator> links) {
  auto world = comm::MpiCommunicator::world();
  if (recipe.topology.join == "rendezvous") {
    // This launch is one site; its leader joins the others later (join_sites).
    comm::Topology topo;
    topo.world_rank = world->rank();
    topo.world_size = world->size();
    topo.num_sites = recipe.topology.sites;
    topo.site = recipe.rendezvous.site;
    topo.site_rank = world->rank();
    topo.site_size = world->size();
    topo.site_sizes.assign(static_cast<std::size_t>(topo.num_sites), world->size());
    topo.site_first_rank.assign(static_cast<std::size_t>(topo.num_sites), 0);
    topo.site_of_rank.assign(static_cast<std::size_t>(world->size()), topo.site);
    comm::SiteComms comms;
    comms.topology = topo;
    comms.site = world->split(0, world->rank());
    comms.world = std::move(world);
    return comms;
  }
  const auto& t = recipe.topology;
  comm::Topology topo;
  if (t.site_by == "node") {
    topo = comm::Topology::by_node(world->rank(), comm::gather_node_names(*world), t.nodes_per_site);
    if (t.sites_given && topo.num_sites != t.sites)
      throw RecipeError("topology.sites = " + std::to_string(t.sites) + " but topology.site_by = \"node\" finds " +
                        std::to_string(topo.num_sites) + " sites on this launch (" +
                        std::to_string(t.nodes_per_site) + " nodes per site); leave topology.sites out to take them");
  } else if (t.site_by == "links") {
    topo = topology_by_links(t, *world);
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

std::unique_ptr<comm::Membership> join_sites(const Recipe& recipe, comm::SiteComms& comms, const std::string& signature,
                                             double tokens_per_step, const comm::MessageAuth* auth,
                                             std::shared_ptr<comm::LinkEmulator> links,
                                             std::function<void(const char* step)> at_join_step) {
  if (!comms.topology.is_leader()) return nullptr;
  comm::JoinConfig config;
  config.run_id = recipe.rendezvous.run_id;
  config.hello.index = recipe.rendezvous.site;
  config.hello.name = recipe.rendezvous.site_name;
  config.hello.weight = tokens_per_step;
  config.hello.signature = signature;
  config.expected_sites = recipe.topology.sites;
  config.min_sites = recipe.rendezvous.min_sites;
  config.join_timeout_s = recipe.rendezvous.join_timeout_s;
  config.deadline_s = recipe.timeouts.timeout_s;
  config.ping_s = recipe.rendezvous.ping_s;
  config.auth = auth;
  config.exchange_channel = recipe.sync.overlap != outer::OverlapMode::kNone;
  if (at_join_step) config.at_join_step = [at_join_step](const char* step, const std::string&) { at_join_step(step); };
  auto membership = std::make_unique<comm::Membership>(config);
  comms.leaders = membership->release_leaders();
  comms.exchange_channel = membership->release_exchange_channel();
  if (links) {
    const comm::Membership* m = membership.get();  // lives as long as the run's communicators
    const auto site_of = [m](int rank) { return m->members().at(static_cast<std::size_t>(rank)).index; };
    comms.leaders = std::make_unique<comm::EmulatedCommunicator>(std::move(comms.leaders), links, site_of);
    if (comms.exchange_channel)
      comms.exchange_channel =
          std::make_unique<comm::EmulatedCommunicator>(std::move(comms.exchange_channel), links, site_of);
  }
  return membership;
}

}  // namespace diloco::app
