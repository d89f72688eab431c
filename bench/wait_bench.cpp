// What waiting costs the cores: 2 ranks (run with mpirun -np 2), each one
// rank of its own site, on a host where ranks share the cores.
//
// Table 1, CPU while one rank waits --wait-s for the other (which sleeps,
// then joins): the waiting thread's CPU time over the wait, as a share of
// one core, for
//   - a comm thread's exchange (an all-gather of a few bytes, so the figure
//     is the wait's, on its duplicated communicator: paced tests,
//     comm/wait_pacer.h);
//   - the same exchange on a communicator that waits in MPI_Wait (Open MPI
//     spins: what every wait cost before pacing, the baseline);
//   - a main-thread wait_for_all() (a site's ranks waiting for their
//     leader's exchange, a fast site for the slowest);
//   - a comm thread with no job at all (the whole process, main thread asleep).
// Table 2, inner steps of the quickstart model (byte GPT, d_model 128, 2
// layers, batch 16 x 64, one thread) on both ranks at once, in alternating
// blocks: without an exchange, and with this rank's comm thread waiting in
// an exchange (an all-gather of 1 MB) the other rank joins only after its
// own block (so it is in flight for the whole block), paced and spinning.
// Median step time of each.
//
// Table 3, what the pauses cost in latency: an exchange (1 MB) whose peer
// comes 10 ms, 100 ms and 1 s late, timed to its end, paced and spinning.
//
//   mpirun -np 2 bench_wait [--wait-s S] [--steps N] [--blocks B] [--repeats R]
#include <sys/resource.h>
#include <time.h>

#include <cxxopts.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_thread.h"
#include "comm/mpi_communicator.h"
#include "inner/inner_loop.h"
#include "inner/models/model.h"
#include "outer/clock.h"
#include "synthetic_corpus.h"
#include "median.h"

using namespace diloco;

namespace {

struct Options {
  double wait_s = 3.0;
  int steps = 10;
  int blocks = 20;
  int repeats = 5;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_wait: %s\n", problem.c_str());
  comm::MpiSession::abort(2);
}

Options parse(int argc, char** argv) {
  Options o;
  cxxopts::Options options("bench_wait", "What waiting costs the cores (run with mpirun -np 2)");
  options.add_options()("wait-s", "how late the peer comes in table 1", cxxopts::value(o.wait_s))(
      "steps", "inner steps per block", cxxopts::value(o.steps))("blocks", "blocks of each kind", cxxopts::value(o.blocks))(
      "repeats", "exchanges per case in table 3", cxxopts::value(o.repeats));
  try {
    const auto given = options.parse(argc, argv);
    if (!given.unmatched().empty()) usage("unexpected argument " + given.unmatched().front());
  } catch (const cxxopts::exceptions::exception& e) {
    usage(e.what());
  }
  if (o.wait_s <= 0.0 || o.steps < 1 || o.blocks < 1 || o.repeats < 1)
    usage("--wait-s, --steps, --blocks and --repeats must be > 0");
  return o;
}

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

using outer::seconds_since;

using bench::median;

// `work` on rank 0, timed by the CPU clock of the thread that runs it, while
// rank 1 sleeps wait_s and then does `join`. Returns rank 0's CPU share.
template <class Work, class Join>
double cpu_share_while_waiting(comm::Communicator& world, double wait_s, Work work, Join join) {
  world.barrier();
  if (world.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    join();
    return 0.0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu = work();
  return cpu / seconds_since(t0);
}

// Table 1 exchanges a few bytes, so its figures are the wait's alone (moving
// a payload costs the same CPU either way); table 2 exchanges 1 MB.
std::vector<std::byte> payload(std::size_t bytes) { return std::vector<std::byte>(bytes, std::byte{1}); }
constexpr std::size_t kWaitBytes = 8;
constexpr std::size_t kStepsBytes = std::size_t{1} << 20;

void cpu_table(const Options& o, comm::MpiCommunicator& world, comm::Communicator& paced, comm::Communicator& spinning) {
  comm::CommThread thread;
  const auto on_thread = [&](comm::Communicator& c) {
    return [&] {
      double cpu = 0.0;
      thread.submit([&] {
          const double c0 = thread_cpu_s();
          c.all_gather(payload(kWaitBytes));
          cpu = thread_cpu_s() - c0;
        }).get();
      return cpu;
    };
  };
  const auto gather = [](comm::Communicator& c) { return [&c] { c.all_gather(payload(kWaitBytes)); }; };
  const double paced_share = cpu_share_while_waiting(world, o.wait_s, on_thread(paced), gather(paced));
  const double spin_share = cpu_share_while_waiting(world, o.wait_s, on_thread(spinning), gather(spinning));
  const double all_share = cpu_share_while_waiting(
      world, o.wait_s,
      [&] {
        const double c0 = thread_cpu_s();
        world.wait_for_all();
        return thread_cpu_s() - c0;
      },
      [&] { world.wait_for_all(); });
  // No job: the whole process while its main thread sleeps beside an idle comm thread.
  world.barrier();
  const double p0 = process_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.wait_s));
  const double idle_share = (process_cpu_s() - p0) / seconds_since(t0);
  if (world.rank() != 0) return;
  std::printf("| waiting %.0f s for a late peer | CPU, share of one core |\n|---|---:|\n", o.wait_s);
  std::printf("| comm thread in an exchange, paced tests | %.4f |\n", paced_share);
  std::printf("| comm thread in an exchange, MPI_Wait (spins; the baseline) | %.4f |\n", spin_share);
  std::printf("| main thread in wait_for_all (paced) | %.4f |\n", all_share);
  std::printf("| idle comm thread, no job (whole process, main thread asleep) | %.4f |\n", idle_share);
  std::printf("idle comm thread: %.2f%% of a core\n\n", 100.0 * std::max(paced_share, idle_share));
}

// Table 3: what pacing costs in latency. Rank 1 joins the exchange (1 MB)
// `late` after rank 0, which times it to its end, paced and spinning
// (median of --repeats): the difference is what the pauses add.
void latency_table(const Options& o, comm::MpiCommunicator& world, comm::Communicator& paced,
                   comm::Communicator& spinning) {
  comm::CommThread thread;
  const double lates[] = {0.01, 0.1, 1.0};
  if (world.rank() == 0)
    std::printf("| peer late by | exchange ms, spinning | paced | added ms | added / late |\n|---:|---:|---:|---:|---:|\n");
  for (double late : lates) {
    std::vector<double> times[2];
    for (int r = 0; r < o.repeats; ++r) {
      for (int k = 0; k < 2; ++k) {
        comm::Communicator* c = k == 0 ? &spinning : &paced;
        world.barrier();
        if (world.rank() == 1) std::this_thread::sleep_for(std::chrono::duration<double>(late));
        const auto t0 = std::chrono::steady_clock::now();
        thread.submit([c] { c->all_gather(payload(kStepsBytes)); }).get();
        times[k].push_back(seconds_since(t0));
      }
    }
    const double spin = median(times[0]), pace = median(times[1]);
    if (world.rank() == 0)
      std::printf("| %.0f ms | %.2f | %.2f | %.2f | %.3f |\n", late * 1e3, spin * 1e3, pace * 1e3, (pace - spin) * 1e3,
                  (pace - spin) / late);
  }
  if (world.rank() == 0) std::printf("\n");
}

void steps_table(const Options& o, comm::MpiCommunicator& world, comm::Communicator& paced,
                 comm::Communicator& spinning) {
  inner::prepare_host_compute(1);
  inner::ModelConfig model;  // the quickstart's
  model.d_model = 128;
  model.n_layers = 2;
  model.n_heads = 4;
  model.seq_len = 64;
  inner::InnerOptimConfig optim;
  optim.warmup_steps = 10;
  inner::DataConfig data;
  data.batch_size = 16;
  const auto corpus = bench::synthetic_corpus(std::size_t{4} << 20);
  inner::SoloGroup group;
  inner::InnerLoop loop(model, optim, data, corpus, inner::ShardSpec{}, group, 1, 1 << 20, inner::DeviceConfig{});
  loop.run(5);  // warm-up
  comm::CommThread thread;
  std::vector<double> alone, with_paced, with_spinning;
  // Block kinds: 0 no exchange; 1, 2 paced with rank 0, then rank 1, waiting;
  // 3, 4 the same spinning.
  for (int b = 0; b < o.blocks; ++b) {
    for (int kind = 0; kind < 5; ++kind) {
      comm::Communicator* c = kind == 0 ? nullptr : kind <= 2 ? &paced : &spinning;
      const bool waiting = kind != 0 && world.rank() == (kind - 1) % 2;
      world.barrier();
      std::future<void> exchange;
      if (waiting) exchange = thread.submit([c] { c->all_gather(payload(kStepsBytes)); });
      const auto t0 = std::chrono::steady_clock::now();
      loop.run(o.steps);
      const double step_s = seconds_since(t0) / o.steps;
      if (c && !waiting) thread.submit([c] { c->all_gather(payload(kStepsBytes)); }).get();
      if (exchange.valid()) exchange.get();
      if (kind == 0) alone.push_back(step_s);
      else if (waiting) (kind <= 2 ? with_paced : with_spinning).push_back(step_s);
    }
  }
  double medians[3] = {median(alone), median(with_paced), median(with_spinning)};
  double sums[3] = {medians[0], medians[1], medians[2]};
  world.all_reduce_sum(std::span<double>(sums, 3));
  if (world.rank() != 0) return;
  std::printf("| inner steps (quickstart model, both ranks computing) | median step ms, mean of ranks | vs no exchange |\n"
              "|---|---:|---:|\n");
  const char* names[3] = {"no exchange in flight", "exchange in flight, comm thread paced",
                          "exchange in flight, comm thread spinning (MPI_Wait)"};
  for (int i = 0; i < 3; ++i)
    std::printf("| %s | %.2f | %.3f |\n", names[i], 1e3 * sums[i] / 2.0, sums[i] / sums[0]);
  std::printf("steps with an exchange in flight / without: %.3f\n", sums[1] / sums[0]);
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiSession mpi(&argc, &argv);
  const Options o = parse(argc, argv);
  auto world = comm::MpiCommunicator::world();
  if (world->size() != 2) usage("run with 2 ranks (mpirun -np 2)");
  auto paced = world->duplicate();       // a comm thread's: paced tests
  auto spinning = world->split(0, world->rank());  // a plain communicator: MPI_Wait
  cpu_table(o, *world, *paced, *spinning);
  latency_table(o, *world, *paced, *spinning);
  steps_table(o, *world, *paced, *spinning);
  return 0;
}
