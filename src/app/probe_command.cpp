// Link probing: the site split of `train`, the same emulated links, then
// pairwise ping-pong and bulk transfers between site leaders; or, with
// --all-ranks, every pair of ranks over the real network, then every rank's
// step time with the site leaders' exchanges in bursts, written as a
// cluster file (probe_ranks.h).
//
// Sites launched apart (topology.join = "rendezvous") are probed as they
// train: each launch is one site, and its leader joins the other sites'
// leaders through the rendezvous, under the run id RUN-probe (a probe never
// meets a training run of the same id) and waiting for every site of
// topology.sites (rendezvous.min_sites does not apply: a probe measures the
// whole group). With --all-ranks each site's ranks probe each other, the
// leaders probe each other, and a pair of ranks in two sites other than
// their leaders carries the leaders' link: only leaders talk between sites.
#include "app/probe_command.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/probe_ranks.h"
#include "app/sites.h"
#include "comm/launch_group.h"
#include "comm/link_probe.h"
#include "comm/membership.h"
#include "comm/message_auth.h"
#include "comm/mpi_communicator.h"
#include "comm/topology.h"
#include "plan/measure/cluster_file.h"
#include "plan/measure/cluster_measures.h"

namespace diloco::app {
namespace {

using Links = std::vector<std::vector<comm::LinkEstimate>>;

// Prints the matrix between sites (by site index) and writes OUT/links.json.
void write_site_links(const Recipe& recipe, const Links& matrix) {
  const int n = static_cast<int>(matrix.size());
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
      std::printf(" %8.2f / %-8.2f", e.latency_s * 1e3, e.bandwidth_bytes_per_s * 8.0 / 1e6);
    }
    std::printf("\n");
  }
  const std::string path = recipe.run.out_dir + "/links.json";
  nlohmann::ordered_json file;
  file["sites"] = n;
  file["links"] = plan::pairs_json(matrix);
  write_whole_file(path, file.dump() + "\n");
  std::printf("written to %s\n", path.c_str());
}

std::vector<std::string> gather_hosts(comm::LaunchGroup& group) {
  const std::string mine = comm::node_name();
  std::vector<std::string> hosts;
  for (const auto& raw : group.all_gather(std::as_bytes(std::span<const char>(mine.data(), mine.size()))))
    hosts.emplace_back(reinterpret_cast<const char*>(raw.data()), raw.size());
  return hosts;
}

// What each rank measures for the cluster file, before the links.
struct RankProbe {
  std::vector<std::string> hosts;  // by group rank
  inner::DeviceConfig device;
  plan::ClusterNode mine;
};

RankProbe describe(const Recipe& recipe, comm::LaunchGroup& group, int site) {
  RankProbe p;
  p.hosts = gather_hosts(group);
  p.mine = describe_rank(recipe, p.hosts, group.rank(), p.device);
  p.mine.site = site;
  return p;
}

// Every rank's steps beside the exchanges of `leaders` (the site leaders;
// nullptr on the other ranks), then the cluster file, written by `writer`
// (a rank that holds every link: `links`).
int finish_cluster(const Recipe& recipe, comm::LaunchGroup& group, comm::Communicator* leaders, RankProbe& p,
                   Links links, bool writer) {
  if (!time_steps(recipe, group, leaders, p.device, p.mine)) return 2;
  plan::Cluster cluster;
  cluster.links = std::move(links);
  cluster.nodes = gather_nodes(group, p.hosts, p.mine);
  if (group.size() > 1) cluster.exchange_codec = recipe.compression.codec;
  group.barrier();
  if (writer) write_cluster(recipe, cluster);
  return 0;
}

// One launch: every pair of ranks is probed in rounds first; the sites the
// plan will form from those links (planned_sites) give the leaders whose
// exchanges the steps are then timed beside.
int probe_all_ranks(const Recipe& recipe) {
  auto world = comm::MpiCommunicator::world();
  comm::LaunchGroup group(*world, nullptr, 0);
  auto probe = describe(recipe, group, -1);
  auto links = comm::probe_links(*world);
  const auto sites = plan::planned_sites(links, recipe.topology.link_gap, recipe.topology.sites);
  const bool leader = std::count(sites.leaders.begin(), sites.leaders.end(), world->rank()) > 0;
  auto leaders = world->split(leader ? 0 : -1, world->rank());
  return finish_cluster(recipe, group, leaders.get(), probe, std::move(links), world->rank() == 0);
}

// One launch, the leaders only, over the recipe's emulated links.
int probe_leaders(const Recipe& recipe, bool root) {
  comm::SiteComms comms;
  try {
    comms = make_sites(recipe, recipe.links.emulator());
  } catch (const RecipeError& e) {
    if (root) std::cerr << "diloco: error: " << e.what() << std::endl;
    return 2;
  }
  Links matrix;
  if (comms.leaders) matrix = comm::probe_links(*comms.leaders);
  comms.world->barrier();
  if (root) write_site_links(recipe, matrix);
  return 0;
}

std::vector<double> encode(const Links& links) {
  std::vector<double> out;
  for (const auto& row : links)
    for (const auto& e : row) out.insert(out.end(), {e.latency_s, e.bandwidth_bytes_per_s});
  return out;
}

Links decode(const std::vector<std::byte>& bytes, std::size_t n) {
  std::vector<double> v(bytes.size() / sizeof(double));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(double));
  Links out(n, std::vector<comm::LinkEstimate>(n));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) out[a][b] = {v[2 * (a * n + b)], v[2 * (a * n + b) + 1]};
  return out;
}

// Sites launched apart: the leader of each launch joins the others (every
// rank of the site learns whether it did; a join that fails is exit 2, as
// in train), then the leaders probe each other, and with --all-ranks each
// site's ranks probe each other too.
class ApartProbe {
 public:
  ApartProbe(const Recipe& recipe, bool all_ranks) : recipe_(for_probe(recipe)), all_ranks_(all_ranks) {}

  int run() {
    comms_ = make_sites(recipe_, nullptr);
    root_ = comms_.world->rank() == 0;
    if (!join()) return 2;
    const Links between = leaders_by_site();
    if (!all_ranks_) {
      if (membership_) membership_->end_run();
      comms_.site->barrier();
      if (root_) write_site_links(recipe_, between);
      return 0;
    }
    comm::LaunchGroup group(*comms_.site, comms_.leaders.get(), recipe_.rendezvous.site);
    auto probe = describe(recipe_, group, recipe_.rendezvous.site);
    const auto inside = comm::probe_links(*comms_.site);  // every rank of the site takes part
    const auto mine = root_ ? encode(inside) : std::vector<double>{};
    const auto insides = group.all_gather(std::as_bytes(std::span<const double>(mine)));
    Links links;
    if (root_) links = every_rank(group, insides, between);
    const int code = finish_cluster(recipe_, group, comms_.leaders.get(), probe, std::move(links), root_);
    if (membership_) membership_->end_run();
    return code;
  }

 private:
  static Recipe for_probe(Recipe r) {
    r.rendezvous.run_id += "-probe";
    r.rendezvous.min_sites = r.topology.sites;
    r.sync.overlap = outer::OverlapMode::kNone;  // no comm thread's channel
    return r;
  }

  bool join() {
    std::string problem;
    try {
      if (!recipe_.security.key_file.empty()) auth_.emplace(comm::MessageAuth::from_file(recipe_.security.key_file));
      // A plain probe and one of all ranks run different collectives: they
      // must not join each other.
      const std::string signature = all_ranks_ ? "probe --all-ranks" : "probe";
      membership_ = join_sites(recipe_, comms_, signature, 1.0, auth_ ? &*auth_ : nullptr,
                               all_ranks_ ? nullptr : recipe_.links.emulator(), nullptr);
    } catch (const comm::JoinError& e) {
      problem = std::string("rendezvous: ") + e.what();
    } catch (const std::invalid_argument& e) {  // the key file
      problem = e.what();
    }
    double failed = problem.empty() ? 0.0 : 1.0;
    comms_.site->all_reduce_sum(std::span<double>(&failed, 1));
    if (!problem.empty()) std::cerr << "diloco: error: " << problem << std::endl;
    if (failed == 0.0 && root_)
      std::printf("joined probe \"%s\" as %s: %d sites\n", recipe_.rendezvous.run_id.c_str(),
                  recipe_.rendezvous.site_name.c_str(), comms_.leaders->size());
    return failed == 0.0;
  }

  // On the leader: the leaders' links, by site index (the members are
  // listed by their rank among the leaders).
  Links leaders_by_site() {
    if (!comms_.leaders) return {};
    const auto by_rank = comm::probe_links(*comms_.leaders);
    const auto n = static_cast<std::size_t>(recipe_.topology.sites);
    Links out(n, std::vector<comm::LinkEstimate>(n));
    const auto& members = membership_->members();
    for (std::size_t a = 0; a < members.size(); ++a)
      for (std::size_t b = 0; b < members.size(); ++b)
        out[static_cast<std::size_t>(members[a].index)][static_cast<std::size_t>(members[b].index)] = by_rank[a][b];
    return out;
  }

  // Every pair of the group's ranks: inside a site, its own probe; between
  // two sites, their leaders' link.
  static Links every_rank(const comm::LaunchGroup& group, const std::vector<std::vector<std::byte>>& insides,
                          const Links& between) {
    const auto& first = group.launch_first_ranks();
    const int n = group.size();
    std::vector<int> site_of(static_cast<std::size_t>(n));
    std::vector<Links> site(first.size());
    for (std::size_t s = 0; s < first.size(); ++s) {
      const int end = s + 1 < first.size() ? first[s + 1] : n;
      for (int r = first[s]; r < end; ++r) site_of[static_cast<std::size_t>(r)] = static_cast<int>(s);
      site[s] = decode(insides[static_cast<std::size_t>(first[s])], static_cast<std::size_t>(end - first[s]));
    }
    Links out(static_cast<std::size_t>(n), std::vector<comm::LinkEstimate>(static_cast<std::size_t>(n)));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        const int sa = site_of[a], sb = site_of[b];
        out[a][b] = sa == sb ? site[sa][a - first[sa]][b - first[sa]] : between[sa][sb];
      }
    return out;
  }

  const Recipe recipe_;
  const bool all_ranks_;
  bool root_ = false;
  comm::SiteComms comms_;
  std::optional<comm::MessageAuth> auth_;
  std::unique_ptr<comm::Membership> membership_;
};

}  // namespace

int run_probe(const Recipe& recipe, bool all_ranks, int* argc, char*** argv) {
  static comm::MpiSession mpi(argc, argv);  // ended below, or at exit
  const bool apart = recipe.topology.join == "rendezvous";
  int code = 0;
  try {
    if (!apart) return all_ranks ? probe_all_ranks(recipe) : probe_leaders(recipe, mpi.world_rank() == 0);
    code = ApartProbe(recipe, all_ranks).run();
  } catch (const comm::CommError& e) {
    std::cerr << "diloco: communication error: " << e.what() << std::endl;
    if (!apart) comm::MpiSession::abort(3);
    code = 3;
  }
  // A site that took part in a membership may hang in MPI_Finalize: its end is bounded.
  comm::end_membership_process(code);
}

}  // namespace diloco::app
