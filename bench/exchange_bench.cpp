// The outer step between sites, measured on real ranks (one rank per site).
//
// --mode link: one exchange of N values per codec over an emulated link
//   (every site's link at --latency-ms and --mbps), against the link's lower
//   bound for the same payload: 2 latencies (the weights, then the payload)
//   plus payload bytes / bandwidth. Median of --repeats exchanges.
// --mode outer: exchange (no emulation: the machine's own MPI) plus the
//   outer Nesterov step for N values, and this rank's peak resident memory
//   against the parameter bytes; one row (the script runs one size per process).
//
//   mpirun -np S bench_exchange --mode link|outer [--values N] [--latency-ms L]
//          [--mbps B] [--codecs a,b,...] [--repeats R]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "comm/link_emulator.h"
#include "comm/mpi_communicator.h"
#include "outer/clock.h"
#include "outer/exchange.h"
#include "outer/outer_optimizer.h"
#include "median.h"

using namespace diloco;
using outer::seconds_since;

namespace {

struct Options {
  std::string mode = "link";
  std::size_t values = std::size_t{1} << 22;
  double latency_ms = 50.0;
  double mbps = 100.0;
  std::vector<std::string> codecs = {"none", "fp16", "int8", "int4", "topk", "sign"};
  int repeats = 3;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_exchange: %s\n", problem.c_str());
  comm::MpiSession::abort(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string v = argv[i + 1];
    char* end = nullptr;
    if (flag == "--mode") o.mode = v;
    else if (flag == "--values") o.values = std::strtoull(v.c_str(), &end, 10);
    else if (flag == "--latency-ms") o.latency_ms = std::strtod(v.c_str(), &end);
    else if (flag == "--mbps") o.mbps = std::strtod(v.c_str(), &end);
    else if (flag == "--repeats") o.repeats = static_cast<int>(std::strtol(v.c_str(), &end, 10));
    else if (flag == "--codecs") {
      o.codecs.clear();
      std::stringstream list(v);
      for (std::string c; std::getline(list, c, ',');) o.codecs.push_back(c);
    } else usage("unknown flag " + flag);
    if (end && *end) usage(flag + ": not a number: " + v);
  }
  if (o.mode != "link" && o.mode != "outer") usage("--mode must be link or outer");
  if (o.values == 0 || o.repeats < 1 || o.mbps <= 0.0 || o.latency_ms < 0.0) usage("values, repeats, mbps must be > 0");
  return o;
}

std::vector<float> pseudo_gradient(int site, std::size_t n) {
  std::mt19937 rng(100 + site);
  std::normal_distribution<float> d(0.0f, 1e-3f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

using diloco::bench::median;

int run_link(const Options& o, comm::Communicator& world) {
  const int sites = world.size();
  auto links = std::make_shared<comm::LinkEmulator>(
      std::vector<comm::SiteLink>(static_cast<std::size_t>(sites), comm::SiteLink{o.latency_ms, o.mbps}),
      std::vector<comm::LinkChange>{});
  comm::EmulatedCommunicator emulated(comm::MpiCommunicator::world(), links);
  const bool root = world.rank() == 0;
  if (root) {
    std::printf("| codec | payload MB | measured s | bound s | measured / bound |\n|---|---:|---:|---:|---:|\n");
  }
  for (const auto& name : o.codecs) {
    std::string error;
    compression::CodecConfig config;
    config.name = name;
    const auto codec = compression::make_codec(config, &error);  // checks the name
    if (!codec) usage("--codecs: " + error);
    outer::ExchangeOptions options;
    options.algorithm = outer::ExchangeAlgorithm::kAllGather;
    options.error_feedback = name != "none";
    outer::Exchange exchange(emulated, compression::make_codec(config), options);
    std::vector<double> times;
    std::uint64_t payload = 0;
    for (int r = 0; r <= o.repeats; ++r) {  // the first one warms up
      auto delta = pseudo_gradient(world.rank(), o.values);
      world.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      const auto stats = exchange.average(delta, {1.0, 1, false}, r);
      const double t = seconds_since(t0);
      double total = t;  // the mean over sites is what the table reports
      world.all_reduce_sum(std::span<double>(&total, 1));
      if (r > 0) times.push_back(total / sites);
      payload = stats.critical_bytes;
    }
    // Lower bound: the weights and the payload each cross the link once. The
    // payload is the largest one sent (top-k's size depends on the data).
    const double bound = 2.0 * o.latency_ms / 1e3 + static_cast<double>(payload) * 8.0 / (o.mbps * 1e6);
    const double measured = median(times);
    if (root)
      std::printf("| %s | %.2f | %.3f | %.3f | %.3f |\n", name.c_str(), static_cast<double>(payload) / 1e6, measured,
                  bound, measured / bound);
  }
  return 0;
}

int run_outer(const Options& o, comm::Communicator& world) {
  outer::ExchangeOptions options;
  options.algorithm = outer::ExchangeAlgorithm::kAllGather;
  outer::Exchange exchange(world, compression::make_codec("none"), options);
  outer::OuterConfig config;  // Nesterov, lr 0.7, momentum 0.9
  auto optimizer = outer::make_outer_optimizer(config, o.values);
  std::vector<float> global(o.values, 0.5f);
  std::vector<double> exchange_s, step_s;
  for (int r = 0; r <= o.repeats; ++r) {
    auto delta = pseudo_gradient(world.rank(), o.values);
    world.barrier();
    auto t0 = std::chrono::steady_clock::now();
    exchange.average(delta, {1.0, 1, false}, r);
    const double e = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    optimizer->step(global, delta);
    const double s = seconds_since(t0);
    if (r > 0) {
      exchange_s.push_back(e);
      step_s.push_back(s);
    }
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  const double rss = comm::max_over_ranks(world, static_cast<double>(usage.ru_maxrss) * 1024.0);
  if (world.rank() == 0) {
    const double param_mb = static_cast<double>(o.values) * 4.0 / 1e6;
    std::printf("| %.1fM | %.1f | %.3f | %.3f | %.3f | %.0f | %.2f |\n", static_cast<double>(o.values) / 1e6, param_mb,
                median(exchange_s), median(step_s), median(exchange_s) + median(step_s), rss / 1e6,
                rss / 1e6 / param_mb);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiSession mpi(&argc, &argv);
  const Options o = parse(argc, argv);
  auto world = comm::MpiCommunicator::world();
  return o.mode == "link" ? run_link(o, *world) : run_outer(o, *world);
}
