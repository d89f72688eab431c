// Link probing: the site split of `train`, the same emulated links, then
// pairwise ping-pong and bulk transfers between site leaders; or, with
// --all-ranks, every pair of ranks over the real network, then every rank's
// step time with the site leaders' exchanges in bursts, written as a
// cluster file.
#include "app/probe_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "app/recipe_steps.h"
#include "app/sites.h"
#include "app/train_support.h"
#include "comm/comm_thread.h"
#include "comm/link_probe.h"
#include "comm/mpi_communicator.h"
#include "comm/topology.h"
#include "outer/exchange.h"
#include "plan/measure/cluster_file.h"
#include "plan/measure/cluster_measures.h"
#include "plan/model/memory_model.h"

namespace diloco::app {
namespace {

// What this rank may use: its GPU's memory, or its share of the host's memory
// (the ranks on one host split it evenly).
double usable_memory(const inner::DeviceConfig& device, const std::vector<std::string>& hosts, int rank) {
  if (device.cuda) return static_cast<double>(inner::cuda_device_memory(device.index));
  const double host = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const auto sharing = std::count(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(rank)]);
  return host / static_cast<double>(std::max<std::ptrdiff_t>(1, sharing));
}

struct OthersFailed {};  // another rank could not build the model or data

// What a site leader's overlapped exchange does to its steps: a comm thread
// (on a duplicated communicator that sleeps between tests, as training's)
// runs the recipe's exchange (codec, algorithm, key) of a whole model's
// pseudo-gradient among the site leaders, as training would, back to back
// for a burst, then rests as long as the burst took, and again. A burst
// lasts until every rank has had 0.6 s or four of its steps, whichever is
// longer (each exchange timed, and the small all-reduce of all ranks after
// it); after each exchange (and each rest) all ranks say whether their burst
// is over and whether they were asked to stop: all stop when all were. The
// other ranks of a site run no exchange but take part in every all-reduce,
// so their steps are timed in the same bursts.
class ExchangeBursts final : public plan::BackgroundBursts {
 public:
  // `leaders`: the leaders' communicator on a leader, nullptr elsewhere.
  ExchangeBursts(comm::Communicator& world, comm::Communicator* leaders, const Recipe& recipe, std::size_t params,
                 double step_s)
      : burst_s_(std::max(0.6, 4.0 * step_s)), comm_(world.duplicate()), delta_(leaders ? params : 0) {
    if (leaders) {
      leaders_ = leaders->duplicate();
      auth_ = recipe.security.key_file.empty()
                  ? nullptr
                  : std::make_unique<comm::MessageAuth>(comm::MessageAuth::from_file(recipe.security.key_file));
      auto options = exchange_options(recipe);
      options.auth = auth_.get();
      exchange_.emplace(*leaders_, make_codec(recipe.compression), options);
    }
    for (std::size_t i = 0; i < delta_.size(); ++i)  // a pseudo-gradient's scale, different on every rank
      delta_[i] = 1e-3f * static_cast<float>((i * 2654435761u + static_cast<std::size_t>(comm_->rank()) * 97) % 2001) /
                      2000.0f - 5e-4f;
    done_ = thread_.submit([this] { run(); });
  }
  ~ExchangeBursts() override {
    if (done_.valid()) try {
        stop();
      } catch (...) {
      }
  }
  std::uint64_t phase() const override { return phase_.load(); }
  void stop() override {
    stop_ = true;
    done_.get();
  }
  std::vector<double> exchange_seconds() const override { return seconds_; }
  std::vector<double> control_seconds() const override { return controls_; }

 private:
  struct Agreed {
    bool over, stop;
  };
  Agreed agree(bool over) {  // each: true when every rank says so
    double v[2] = {over ? 1.0 : 0.0, stop_ ? 1.0 : 0.0};
    comm_->all_reduce_sum(std::span<double>(v, 2));
    const double all = static_cast<double>(comm_->size());
    return {v[0] == all, v[1] == all};
  }
  void run() {
    for (std::int64_t round = 1;;) {
      ++phase_;  // odd: a burst
      const auto start = std::chrono::steady_clock::now();
      const auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
      for (Agreed a{false, false}; !a.over;) {
        const auto t0 = std::chrono::steady_clock::now();
        if (exchange_) {
          exchange_->average(delta_, outer::SiteUpdate{}, round++);
          seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const auto t1 = std::chrono::steady_clock::now();
        a = agree(since() >= burst_s_);
        controls_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
        if (a.stop) return;
      }
      const double burst = since();
      ++phase_;  // even: a rest
      std::this_thread::sleep_for(std::chrono::duration<double>(burst));
      if (agree(true).stop) return;
    }
  }

  const double burst_s_;
  std::unique_ptr<comm::Communicator> comm_;     // all ranks: the burst agreements
  std::unique_ptr<comm::Communicator> leaders_;  // the leaders: the exchanges
  std::unique_ptr<comm::MessageAuth> auth_;
  std::optional<outer::Exchange> exchange_;
  std::vector<float> delta_;
  std::vector<double> seconds_;   // each exchange's; read once the thread has finished
  std::vector<double> controls_;  // each all-reduce right after an exchange; likewise
  std::atomic<std::uint64_t> phase_{0};
  std::atomic<bool> stop_{false};
  comm::CommThread thread_;
  std::future<void> done_;
};

// This rank's host, device and memory, with MPI and libtorch up and no
// model yet.
plan::ClusterNode describe_rank(const Recipe& recipe, const std::vector<std::string>& hosts, int rank,
                                inner::DeviceConfig& device) {
  device = inner::choose_device(recipe.devices.device, inner::cuda_device_count(), comm::discover_launch().local_rank);
  plan::ClusterNode mine;
  mine.rank = rank;
  mine.host = hosts[static_cast<std::size_t>(rank)];
  mine.device = device.cuda ? "cuda:" + std::to_string(device.index) : "cpu";
  mine.memory_bytes = usable_memory(device, hosts, rank);
  inner::warm_up_runtime(device);
  mine.runtime_bytes = plan::resident_bytes();
  return mine;
}

// Every rank times the recipe's step at once (as in training, where they
// share the machines), then again with the leaders' exchanges in bursts.
// Every rank learns whether any failed, so all stop together: once when the
// model and data are built, again before the steps timed with bursts (more
// than one rank), and once after. A rank that fails before a line-up takes
// part in those left from here, so every rank joins each sum exactly once.
// Returns false when any rank failed (this one's error printed).
bool time_steps(const Recipe& recipe, comm::Communicator& world, comm::Communicator* leaders,
                const inner::DeviceConfig& device, plan::ClusterNode& mine) {
  std::string error;
  const int line_ups = world.size() > 1 ? 2 : 1;
  int lined_up = 0;
  bool others_failed = false;
  const auto line_up = [&](double failed) {
    ++lined_up;
    world.all_reduce_sum(std::span<double>(&failed, 1));
    return failed > 0.0;
  };
  std::function<std::unique_ptr<plan::BackgroundBursts>(std::size_t, double)> bursts;
  if (line_ups > 1)
    bursts = [&](std::size_t params, double step_s) {
      return std::make_unique<ExchangeBursts>(world, leaders, recipe, params, step_s);
    };
  try {
    auto measured = measure_recipe(
        recipe, device, /*time_steps=*/true, [&] { if (line_up(0.0)) throw OthersFailed{}; }, bursts);
    mine.step_s = measured.step_s;
    mine.steps = std::move(measured.steps);
    mine.overlap_slowdown = measured.overlap_slowdown;
    mine.exchanges = std::move(measured.exchanges);
    mine.controls = std::move(measured.controls);
  } catch (const RecipeError& e) {
    error = e.what();
  } catch (const inner::DataError& e) {
    error = std::string("data: ") + e.what();
  } catch (const std::invalid_argument& e) {  // the key file
    error = e.what();
  } catch (const OthersFailed&) {
    others_failed = true;
  }
  while (lined_up < line_ups) line_up(1.0);
  double failed = error.empty() && !others_failed ? 0.0 : 1.0;
  world.all_reduce_sum(std::span<double>(&failed, 1));
  if (!error.empty()) std::cerr << "diloco: error: rank " << world.rank() << ": " << error << std::endl;
  return failed == 0.0;
}

std::vector<double> doubles_of(const std::vector<std::byte>& bytes) {
  std::vector<double> out(bytes.size() / sizeof(double));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(double));
  return out;
}

// Every rank's node, gathered on every rank (rank 0 writes them).
std::vector<plan::ClusterNode> gather_nodes(comm::Communicator& world, const std::vector<std::string>& hosts,
                                            const plan::ClusterNode& mine) {
  const auto as_bytes = [](const std::vector<double>& v) { return std::as_bytes(std::span<const double>(v)); };
  const auto numbers =
      world.all_gather(as_bytes({mine.memory_bytes, mine.step_s, mine.runtime_bytes, mine.overlap_slowdown}));
  const auto devices = world.all_gather(std::as_bytes(std::span<const char>(mine.device.data(), mine.device.size())));
  const auto steps = world.all_gather(as_bytes(mine.steps));
  const auto exchanges = world.all_gather(as_bytes(mine.exchanges));
  const auto controls = world.all_gather(as_bytes(mine.controls));
  std::vector<plan::ClusterNode> nodes;
  for (std::size_t r = 0; r < numbers.size(); ++r) {
    const auto v = doubles_of(numbers[r]);
    const std::string device(reinterpret_cast<const char*>(devices[r].data()), devices[r].size());
    nodes.push_back({static_cast<int>(r), hosts[r], device, v[0], v[1], v[2], doubles_of(steps[r]), v[3],
                     doubles_of(exchanges[r]), doubles_of(controls[r])});
  }
  return nodes;
}

void write_cluster(const Recipe& recipe, const plan::Cluster& cluster) {
  for (const auto& n : cluster.nodes) {
    char overlap[48] = "not measured";
    if (n.overlap_slowdown > 0.0) std::snprintf(overlap, sizeof overlap, "x%.3f", n.overlap_slowdown);
    std::printf("rank %-3d %-16s %-8s memory %8.2f GB  step %.4f s (%s with an exchange in flight)  runtime %.0f MB\n",
                n.rank, n.host.c_str(), n.device.c_str(), n.memory_bytes / 1e9, n.step_s, overlap,
                n.runtime_bytes / 1e6);
  }
  const auto& links = cluster.links;
  for (std::size_t a = 0; a < links.size(); ++a)
    for (std::size_t b = a + 1; b < links.size(); ++b)
      std::printf("ranks %zu-%zu: %.3f ms, %.1f Mbit/s\n", a, b, links[a][b].latency_s * 1e3,
                  links[a][b].bandwidth_bytes_per_s * 8.0 / 1e6);
  std::filesystem::create_directories(recipe.run.out_dir);
  const std::string path = recipe.run.out_dir + "/cluster.json";
  std::ofstream(path) << plan::cluster_json(cluster).dump(1) << "\n";
  std::printf("written to %s (diloco plan RECIPE --cluster %s)\n", path.c_str(), path.c_str());
}

// Every pair of ranks is probed in rounds first; the sites the plan will
// form from those links (planned_sites) give the leaders whose exchanges
// the steps are then timed beside.
int probe_all_ranks(const Recipe& recipe) {
  auto world = comm::MpiCommunicator::world();
  const int rank = world->rank();
  const auto hosts = comm::gather_node_names(*world);
  inner::DeviceConfig device;
  plan::ClusterNode mine = describe_rank(recipe, hosts, rank, device);
  plan::Cluster cluster;
  cluster.links = comm::probe_links(*world);
  const auto sites = plan::planned_sites(cluster.links, recipe.topology.link_gap, recipe.topology.sites);
  const bool leader = std::count(sites.leaders.begin(), sites.leaders.end(), rank) > 0;
  auto leaders = world->split(leader ? 0 : -1, rank);
  if (!time_steps(recipe, *world, leaders.get(), device, mine)) return 2;
  cluster.nodes = gather_nodes(*world, hosts, mine);
  if (world->size() > 1) cluster.exchange_codec = recipe.compression.codec;
  world->barrier();
  if (rank == 0) write_cluster(recipe, cluster);
  return 0;
}

}  // namespace

int run_probe(const Recipe& recipe, bool all_ranks, int* argc, char*** argv) {
  comm::MpiSession mpi(argc, argv);
  const bool root = mpi.world_rank() == 0;
  try {
    if (all_ranks) return probe_all_ranks(recipe);
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
    file["links"] = plan::pairs_json(matrix);
    std::ofstream(path) << file.dump() << "\n";
    std::printf("written to %s\n", path.c_str());
    return 0;
  } catch (const comm::CommError& e) {
    std::cerr << "diloco: communication error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  }
}

}  // namespace diloco::app
