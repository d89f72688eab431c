// What `diloco probe --all-ranks` measures on each rank: its host, device
// and memory, and the recipe's inner step timed alone and beside the site
// leaders' exchanges in bursts; gathered over every rank (of one launch, or
// of sites launched apart) and written as a cluster file.
#include "app/probe_ranks.h"

#include <sched.h>
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
#include "app/train_support.h"
#include "comm/comm_thread.h"
#include "comm/mpi_communicator.h"
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
  ExchangeBursts(comm::LaunchGroup& group, comm::Communicator* leaders, const Recipe& recipe, std::size_t params,
                 double step_s)
      : burst_s_(std::max(0.6, 4.0 * step_s)), group_(group.duplicate()), delta_(leaders ? params : 0) {
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
      delta_[i] = 1e-3f * static_cast<float>((i * 2654435761u + static_cast<std::size_t>(group_->rank()) * 97) % 2001) /
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
    group_->all_reduce_sum(std::span<double>(v, 2));
    const double all = static_cast<double>(group_->size());
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
  std::unique_ptr<comm::LaunchGroup> group_;     // all ranks: the burst agreements
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

std::vector<double> doubles_of(const std::vector<std::byte>& bytes) {
  std::vector<double> out(bytes.size() / sizeof(double));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(double));
  return out;
}

}  // namespace

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
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  mine.cores = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
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
bool time_steps(const Recipe& recipe, comm::LaunchGroup& world, comm::Communicator* leaders,
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

// Every rank's node, gathered on every rank (rank 0 writes them).
std::vector<plan::ClusterNode> gather_nodes(comm::LaunchGroup& world, const std::vector<std::string>& hosts,
                                            const plan::ClusterNode& mine) {
  const auto as_bytes = [](const std::vector<double>& v) { return std::as_bytes(std::span<const double>(v)); };
  const auto numbers =
      world.all_gather(as_bytes({mine.memory_bytes, mine.step_s, mine.runtime_bytes, mine.overlap_slowdown,
                                 static_cast<double>(mine.site), static_cast<double>(mine.cores)}));
  const auto devices = world.all_gather(std::as_bytes(std::span<const char>(mine.device.data(), mine.device.size())));
  const auto steps = world.all_gather(as_bytes(mine.steps));
  const auto exchanges = world.all_gather(as_bytes(mine.exchanges));
  const auto controls = world.all_gather(as_bytes(mine.controls));
  std::vector<plan::ClusterNode> nodes;
  for (std::size_t r = 0; r < numbers.size(); ++r) {
    const auto v = doubles_of(numbers[r]);
    const std::string device(reinterpret_cast<const char*>(devices[r].data()), devices[r].size());
    nodes.push_back({static_cast<int>(r), hosts[r], device, v[0], v[1], v[2], doubles_of(steps[r]), v[3],
                     doubles_of(exchanges[r]), doubles_of(controls[r]), static_cast<int>(v[4]), static_cast<int>(v[5])});
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
  const std::string path = recipe.run.out_dir + "/cluster.json";
  write_whole_file(path, plan::cluster_json(cluster).dump(1) + "\n");
  std::printf("written to %s (diloco plan RECIPE --cluster %s)\n", path.c_str(), path.c_str());
}

void write_whole_file(const std::string& path, const std::string& text) {
  const auto folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder);
  const std::string mine = path + ".part-" + std::to_string(getpid());
  {
    std::ofstream out(mine, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + mine);
  }
  std::filesystem::rename(mine, path);
}

}  // namespace diloco::app
