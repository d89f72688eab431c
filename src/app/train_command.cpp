// `diloco train`: set up MPI, sites, data and the trainer from a recipe, run it,
// and report (resolved recipe, one line per round, summary table).
#include "app/train_command.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "app/metrics_log.h"
#include "app/resume.h"
#include "app/weights.h"
#include "inner/models/model.h"
#include "inner/models/safetensors.h"
#include "app/sites.h"
#include "comm/intra_site.h"
#include "comm/mpi_communicator.h"
#include "comm/watchdog.h"
#include "outer/checkpoint.h"
#include "inner/inner_loop.h"

namespace diloco::app {
namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// True on every rank when every rank passed `ok`; a collective, so a problem
// one rank sees (a file only it cannot read) stops all of them together.
bool all_agree(comm::Communicator& world, bool ok) {
  double failures = ok ? 0.0 : 1.0;
  world.all_reduce_sum(std::span<double>(&failures, 1));
  return failures == 0.0;
}

std::string round_line(const outer::RoundMetrics& m, int rounds) {
  char buf[256];
  const double share = m.wall_s > 0 ? 100.0 * m.comm_s / m.wall_s : 0.0;
  char eval[32] = "   -  ";
  if (m.eval_loss) std::snprintf(eval, sizeof(eval), "%6.3f", *m.eval_loss);
  std::snprintf(buf, sizeof(buf), "round %4d/%-4d H %-4d train %6.3f  eval %s  tokens %9lld  sent %10s  comm %5.1f%%  wall %7.1fs",
                m.round, rounds, m.H, m.train_loss, eval, static_cast<long long>(m.tokens),
                human_bytes(static_cast<double>(m.bytes_sent)).c_str(), share, m.wall_s);
  return buf;
}

// Peak resident memory of this process so far, in bytes.
double peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

void print_summary(const outer::RunSummary& s, int sites, int ranks, double peak_rss) {
  std::printf("\nsummary (%d sites, %d ranks)\n", sites, ranks);
  std::printf("  %-24s %12.4f\n", "start eval loss", s.initial_eval_loss);
  std::printf("  %-24s %12.4f\n", "final eval loss", s.final_eval_loss);
  std::printf("  %-24s %12d\n", "outer rounds", s.rounds);
  std::printf("  %-24s %12lld\n", "inner steps per site", static_cast<long long>(s.inner_steps));
  std::printf("  %-24s %12s\n", "bytes sent between sites", human_bytes(static_cast<double>(s.bytes_sent)).c_str());
  std::printf("  %-24s %11.1fs\n", "wall time", s.wall_s);
  std::printf("  %-24s %12s\n", "peak RSS (largest rank)", human_bytes(peak_rss).c_str());
  std::fflush(stdout);
}

std::unique_ptr<compression::Codec> make_codec(const CompressionConfig& c) {
  compression::CodecConfig config;
  config.name = c.codec;
  config.block = static_cast<std::uint32_t>(c.block);
  config.stochastic_rounding = c.stochastic_rounding;
  config.topk_ratio = c.topk_ratio;
  std::string error;
  auto codec = compression::make_codec(config, &error);
  if (!codec) throw RecipeError("compression: " + error);
  return codec;
}

outer::ExchangeOptions exchange_options(const Recipe& r) {
  outer::ExchangeOptions o;
  o.error_feedback = r.compression.error_feedback.value_or(false);
  o.error_feedback_decay = static_cast<float>(r.compression.error_feedback_decay);
  o.max_norm_ratio = r.max_update_norm_ratio;
  o.seed = static_cast<std::uint64_t>(r.run.seed);
  o.algorithm = r.compression.exchange == "ring"         ? outer::ExchangeAlgorithm::kRing
                : r.compression.exchange == "all_gather" ? outer::ExchangeAlgorithm::kAllGather
                                                         : outer::ExchangeAlgorithm::kAuto;
  return o;
}

// Set by SIGTERM, SIGINT and SIGUSR1; read at round boundaries.
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) { g_stop_signal = signal; }

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &action, nullptr);
}


int train(const Recipe& recipe, const std::string& resume, comm::MpiSession& mpi) {
  const bool root = mpi.world_rank() == 0;
  auto world = comm::MpiCommunicator::world();
  // Which site a rank belongs to, for messages (known once the sites are cut).
  const comm::Topology* cut = nullptr;
  const auto site_of = [&](int rank) {
    if (!cut || rank < 0 || rank >= static_cast<int>(cut->site_of_rank.size())) return std::string("site ?");
    return "site " + std::to_string(cut->site_of_rank[static_cast<std::size_t>(rank)]);
  };

  comm::Watchdog watchdog(recipe.timeouts.startup_timeout_s, recipe.run.out_dir + "/.heartbeat", mpi.world_rank(),
                          mpi.world_size(), site_of);
  world->set_watchdog(&watchdog);
  auto fail = [&](const std::string& message) {
    if (root) std::cerr << "diloco: error: " << message << std::endl;
    return 2;
  };

  if (recipe.sync.overlap != outer::OverlapMode::kNone && !mpi.threads_supported())
    return fail("sync.overlap needs an MPI library with MPI_THREAD_MULTIPLE; this one offers less (use sync.overlap = \"none\")");
  inner::set_compute_threads(recipe.run.threads);

  // Rank 0 owns the output folder: the effective recipe and the metrics.
  std::unique_ptr<MetricsLog> log;
  std::string problem;
  if (root) {
    try {
      std::filesystem::create_directories(recipe.run.out_dir);
      std::ofstream(recipe.run.out_dir + "/recipe.toml") << to_toml(recipe);
    } catch (const std::exception& e) {
      problem = "run.out_dir: cannot write to " + recipe.run.out_dir + ": " + e.what();
    }
  }
  if (!all_agree(*world, problem.empty())) return fail(problem.empty() ? "output folder not writable" : problem);

  std::optional<inner::Corpus> corpus;
  try {
    corpus = load_corpus(recipe);
  } catch (const inner::DataError& e) {
    problem = std::string("data.paths: ") + e.what();
  }
  if (!all_agree(*world, problem.empty()))
    return fail(problem.empty() ? "data.paths: another rank could not read the corpus" : problem);

  const auto links = recipe.links.emulator();
  comm::SiteComms comms;
  try {
    comms = make_sites(recipe, links);
  } catch (const RecipeError& e) {
    return fail(e.what());
  }
  for (comm::Communicator* c : {comms.world.get(), comms.site.get(), comms.leaders.get()})
    if (c) c->set_watchdog(&watchdog);
  const auto& topo = comms.topology;
  cut = &topo;
  const std::int64_t total_steps = static_cast<std::int64_t>(recipe.outer.rounds) * recipe.sync.H;

  // The device and what carries gradients inside the site; every rank
  // decides alike, or the job stops with the reason.
  const auto launch = comm::discover_launch();
  inner::DeviceConfig device;
  auto intra_site = comm::IntraSiteBackend::kMpi;
  try {
    device = inner::choose_device(recipe.devices.device, inner::cuda_device_count(), launch.local_rank);
    device.precision = recipe.devices.precision;
    intra_site = comm::choose_intra_site(recipe.devices.intra_site, device.cuda, comm::nccl_built());
    if (device.cuda && recipe.devices.outer_state_on_device)
      throw std::invalid_argument("outer.state_device = \"same\" is not possible on CUDA: the outer optimizer works on host memory");
    problem.clear();
  } catch (const std::invalid_argument& e) {
    problem = e.what();
  }
  if (!all_agree(*world, problem.empty())) return fail(problem.empty() ? "another rank cannot use the device" : problem);
  // NCCL runs on the default stream, which is where libtorch computes (diloco sets no stream guard).
  std::unique_ptr<comm::Communicator> gradient_comm;
  if (intra_site == comm::IntraSiteBackend::kNccl) {
    gradient_comm = comm::make_nccl_communicator(*comms.site, device.index, nullptr);
    gradient_comm->set_watchdog(&watchdog);
  }
  outer::CommReplicaGroup group(gradient_comm ? *gradient_comm : *comms.site, *comms.site, gradient_comm != nullptr);
  inner::ShardSpec shard{topo.site, topo.num_sites, topo.site_rank, topo.site_size};
  std::unique_ptr<inner::InnerLoop> inner_loop;
  try {
    inner_loop = std::make_unique<inner::InnerLoop>(recipe.model, recipe.inner, recipe.data, *corpus, shard, group,
                                                    static_cast<std::uint64_t>(recipe.run.seed), total_steps, device);
    problem.clear();
  } catch (const inner::DataError& e) {
    problem = std::string("data: ") + e.what();
  } catch (const inner::ModelError& e) {
    problem = e.what();
  }
  if (!all_agree(*world, problem.empty()))
    return fail(problem.empty() ? "data or model: another rank could not set up its inner loop" : problem);
  if (recipe.debug.slow_site == topo.site) inner_loop->set_slowdown(recipe.debug.slow_factor);
  // Round 1 starts from existing weights when asked (a resumed checkpoint
  // then replaces them); every rank reads them, as it reads the data.
  try {
    init_weights(recipe, *inner_loop);
  } catch (const inner::WeightsError& e) {
    problem = e.what();
  }
  if (!all_agree(*world, problem.empty()))
    return fail(problem.empty() ? "model.init_from: another rank could not read it" : problem);

  outer::OuterParts parts;
  parts.exchange = [&](comm::Communicator& leaders) {
    return std::make_unique<outer::Exchange>(leaders, make_codec(recipe.compression), exchange_options(recipe));
  };
  parts.optimizer = [&](std::size_t params) { return outer::make_outer_optimizer(recipe.outer, params); };
  outer::CheckpointConfig checkpoint;
  checkpoint.dir = recipe.checkpoint_dir();
  checkpoint.every = recipe.checkpoint.every;
  checkpoint.keep = recipe.checkpoint.keep;
  checkpoint.recipe_toml = to_toml(recipe);
  checkpoint.model_signature = inner_loop->model_signature();
  outer::FaultConfig faults;
  faults.nan_site = recipe.debug.nan_site;
  faults.nan_round = recipe.debug.nan_round;
  std::unique_ptr<outer::Trainer> trainer_ptr;
  try {
    trainer_ptr = std::make_unique<outer::Trainer>(comms, *inner_loop, parts, recipe.outer, recipe.sync,
                                                   recipe.metrics, checkpoint, faults);
    problem.clear();
  } catch (const std::invalid_argument& e) {
    problem = std::string("sync: ") + e.what();
  }
  if (!all_agree(*world, problem.empty())) return fail(problem.empty() ? "sync: another rank refused the settings" : problem);
  outer::Trainer& trainer = *trainer_ptr;

  const std::string resume_path = choose_resume(recipe, resume, *comms.world);
  int resumed_round = 0;
  if (!resume_path.empty()) {
    trainer.restore(resume_path);
    resumed_round = outer::CheckpointStore::round_of(resume_path);
    if (links) links->set_round(resumed_round + 1);
    if (root) std::printf("resuming from %s (round %d)\n", resume_path.c_str(), resumed_round);
  }
  set_aside_abandoned(recipe, resumed_round, *comms.world);
  if (root) {
    const std::string metrics_path = recipe.run.out_dir + "/metrics.jsonl";
    try {
      if (resumed_round > 0) trim_metrics(metrics_path, resumed_round);
      log = std::make_unique<MetricsLog>(metrics_path, resumed_round > 0);
    } catch (const std::exception& e) {
      problem = std::string("metrics: ") + e.what();
    }
  }
  if (!all_agree(*world, problem.empty())) return fail(problem.empty() ? "metrics: rank 0 cannot write them" : problem);

  if (root) {
    std::ostringstream sizes;
    for (std::size_t s = 0; s < topo.site_sizes.size(); ++s) sizes << (s ? "+" : "") << topo.site_sizes[s];
    std::printf("diloco %s: %s | %d ranks in %d sites (%s) | %.2fM params | corpus %s from %zu files (held out %s)\n",
                DILOCO_VERSION, recipe.run.name.c_str(), topo.world_size, topo.num_sites, sizes.str().c_str(),
                static_cast<double>(inner_loop->num_params()) / 1e6,
                human_bytes(static_cast<double>(corpus->train().size() + corpus->eval().size())).c_str(),
                corpus->files(), human_bytes(static_cast<double>(corpus->eval().size())).c_str());
    std::printf("device %s%s%s | gradients inside sites over %s | outer state in host memory\n",
                device.cuda ? "cuda:" : "cpu", device.cuda ? std::to_string(device.index).c_str() : "",
                device.precision == inner::Precision::kBf16 ? " (bf16 autocast, fp32 master weights)" : " (fp32)",
                comm::to_string(intra_site));
    std::printf("launched by %s: rank %d of %d, local rank %d of %d%s%s\n", launch.launcher.c_str(), launch.rank,
                launch.size, launch.local_rank, launch.local_size,
                launch.node >= 0 ? (", node " + std::to_string(launch.node)).c_str() : "",
                launch.restart_count > 0 ? (", SLURM_RESTART_COUNT " + std::to_string(launch.restart_count)).c_str() : "");
    std::printf("--- effective recipe (also in %s/recipe.toml) ---\n%s---\n", recipe.run.out_dir.c_str(),
                to_toml(recipe).c_str());
    std::fflush(stdout);
  }

  // Live progress only on a real terminal, at most a few updates a second.
  const char* term = std::getenv("TERM");
  const bool live = root && isatty(STDOUT_FILENO) && term && std::string(term) != "dumb";
  auto last_update = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  outer::Trainer::Hooks hooks;
  const auto& debug = recipe.debug;
  hooks.on_step = [&](int round, int step, double loss) {
    // Test-only faults, on the real process: a rank that dies or freezes.
    const std::int64_t global_step = inner_loop->step();
    if (debug.exit_rank == mpi.world_rank() && debug.exit_step == global_step) {
      std::fprintf(stderr, "diloco: rank %d: [debug] exiting at inner step %lld\n", mpi.world_rank(),
                   static_cast<long long>(global_step));
      std::_Exit(1);
    }
    if (debug.freeze_rank == mpi.world_rank() && debug.freeze_step == global_step) {
      std::fprintf(stderr, "diloco: rank %d: [debug] freezing at inner step %lld\n", mpi.world_rank(),
                   static_cast<long long>(global_step));
      std::raise(SIGSTOP);
    }
    if (!live) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_update < std::chrono::milliseconds(250)) return;
    last_update = now;
    std::printf("\rround %4d/%-4d step %5d loss %6.3f", round, recipe.outer.rounds, step + 1, loss);
    std::fflush(stdout);
  };
  hooks.on_round = [&](const outer::RoundMetrics& m) {
    watchdog.set_timeout(recipe.timeouts.timeout_s);  // start-up is over
    if (links) links->set_round(m.round + 1);
    if (root) {
      log->write(m);
      std::printf("%s%s\n", live ? "\r\033[K" : "", round_line(m, recipe.outer.rounds).c_str());
      for (const auto& e : m.excluded)
        std::printf("  site %d left out of round %d: %s\n", e.site, m.round, outer::to_string(e.reason));
      std::fflush(stdout);
    }
  };
  install_stop_handlers();
  hooks.stop_requested = [] { return g_stop_signal != 0; };
  const auto summary = trainer.run(hooks);
  const double peak_rss = comm::max_over_ranks(*comms.world, peak_rss_bytes());
  if (root) print_summary(summary, topo.num_sites, topo.world_size, peak_rss);
  if (root && summary.stopped)
    std::printf("stopped by a signal after round %d; checkpoint in %s (continue with --resume auto)\n",
                summary.rounds, recipe.checkpoint_dir().c_str());
  return 0;
}

}  // namespace

inner::Corpus load_corpus(const Recipe& recipe) {
  // A window is seq_len + 1 tokens; the corpus must hold at least one more.
  const std::size_t min_bytes = static_cast<std::size_t>(recipe.model.seq_len) + 2;
  return inner::Corpus::load(recipe.data.paths, recipe.data.eval_fraction, min_bytes);
}

int run_train(const Recipe& recipe, const std::string& resume, int* argc, char*** argv) {
  comm::MpiSession mpi(argc, argv);
  try {
    return train(recipe, resume, mpi);
  } catch (const outer::CheckpointError& e) {
    // Raised on every rank alike (the outcome is agreed), so no abort is needed.
    if (mpi.world_rank() == 0) std::cerr << "diloco: error: checkpoint: " << e.what() << std::endl;
    return 2;
  } catch (const comm::CommError& e) {
    std::cerr << "diloco: communication error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  } catch (const outer::ExchangeError& e) {
    std::cerr << "diloco: rank " << mpi.world_rank() << ": exchange error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  } catch (const std::exception& e) {
    std::cerr << "diloco: rank " << mpi.world_rank() << ": internal error: " << e.what() << std::endl;
    comm::MpiSession::abort(1);
  }
}

}  // namespace diloco::app
