// `diloco train`: set up MPI, sites, data and the trainer from a recipe, run it,
// and report (resolved recipe, one line per round, summary table). The set-up
// is a sequence of named steps; an input problem any rank meets in a step
// stops every rank together with exit 2 and one message.
#include "app/train_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "app/debug_faults.h"
#include "app/gpu_placement.h"
#include "app/metrics_log.h"
#include "app/resume.h"
#include "app/sites.h"
#include "app/train_report.h"
#include "app/train_support.h"
#include "app/weights.h"
#include "comm/intra_site.h"
#include "comm/mpi_communicator.h"
#include "comm/watchdog.h"
#include "inner/inner_loop.h"
#include "inner/models/model.h"
#include "inner/models/safetensors.h"
#include "outer/checkpoint.h"

namespace diloco::app {
namespace {

// An input problem met in a set-up step, to be agreed on by every rank.
struct StepError {
  std::string message;
};

// One rank's run, built step by step; the members live as long as the run.
class TrainSession {
 public:
  TrainSession(const Recipe& recipe, const std::string& resume, comm::MpiSession& mpi)
      : recipe_(recipe),
        resume_(resume),
        mpi_(mpi),
        root_(mpi.world_rank() == 0),
        world_(comm::MpiCommunicator::world()),
        watchdog_(startup_timeout(recipe), recipe.run.out_dir + "/.heartbeat", mpi.world_rank(),
                  mpi.world_size(), [this](int rank) { return site_of(rank); }) {
    world_->set_watchdog(&watchdog_);
  }

  // Returns the exit code. A failure that not every rank shares ends the job
  // here, while every member is still alive: its message is printed and the
  // job aborted before any destructor runs that would wait on other ranks
  // (NCCL's ncclCommDestroy is collective and blocks until the peers join,
  // which sit in the next all-reduce; ~Trainer waits for an exchange in
  // flight). Only failures every rank agrees on return normally.
  int run() {
    try {
      return run_steps();
    } catch (const outer::CheckpointError& e) {
      // Raised on every rank alike (the outcome is agreed), so no abort is needed.
      if (root_) std::cerr << "diloco: error: checkpoint: " << e.what() << std::endl;
      return 2;
    } catch (const comm::MinorityError& e) {
      // Every rank of the site stops together; the majority goes on.
      if (root_) std::cerr << "diloco: stopping: " << e.what() << std::endl;
      return kMinorityExit;
    } catch (...) {
      end_job(std::current_exception(), mpi_.world_rank());
    }
  }

 private:
  int run_steps() {
    try {
      step("", [&] { check_threads(); });
      step("", [&] { inner::prepare_host_compute(recipe_.run.threads); });
      step("run.out_dir: ", [&] { open_output(); });
      step("", [&] { read_key(); });
      step("data: ", [&] { dataset_.emplace(load_dataset(recipe_)); });
      step("", [&] { cut_sites(); });
      step("", [&] { choose_device(); });
      step("data: ", [&] { build_inner_loop(); });
      step("", [&] { init_weights(recipe_, *inner_loop_); });
      if (rendezvous_) step("rendezvous: ", [&] { join(); });
      if (rendezvous_ && run_ended()) return 0;
      step("sync: ", [&] { build_trainer(); });
      resume();
      step("metrics: ", [&] { open_metrics(); });
    } catch (const StepError& e) {
      if (root_) std::cerr << "diloco: error: " << e.message << std::endl;
      return 2;
    }
    if (root_) {
      print_banner({recipe_, comms_.topology, launch_, *dataset_, inner_loop_->num_params(), device_,
                    comm::to_string(intra_site_)});
      std::printf("%s\n", mfu_note_.c_str());
    }
    install_stop_handlers();
    const auto summary = trainer_->run(hooks());
    if (membership_ && !summary.stopped) membership_->finish(summary.rounds);
    const double peak_rss = comm::max_over_ranks(*comms_.world, peak_rss_bytes());
    if (root_) print_summary(summary, comms_.topology.num_sites, comms_.topology.world_size, peak_rss);
    if (root_ && summary.stopped)
      std::printf("stopped by a signal after round %d; checkpoint in %s (continue with --resume auto)\n",
                  summary.rounds, recipe_.checkpoint_dir().c_str());
    return 0;
  }

  // Runs `body` on every rank. A typed input error on any rank becomes a
  // StepError on every rank (its message on rank 0 when rank 0 met it, else
  // a line naming the step), so no rank waits for one that gave up.
  void step(const std::string& context, const std::function<void()>& body) {
    std::string problem;
    try {
      body();
    } catch (const RecipeError& e) {
      problem = e.what();
    } catch (const inner::DataError& e) {
      problem = context + e.what();
    } catch (const inner::ModelError& e) {
      problem = e.what();
    } catch (const inner::WeightsError& e) {
      problem = e.what();
    } catch (const std::invalid_argument& e) {
      problem = context + e.what();
    } catch (const StepError& e) {
      problem = e.message;
    } catch (const comm::JoinError& e) {
      problem = context + e.what();
    }
    double failures = problem.empty() ? 0.0 : 1.0;
    world_->all_reduce_sum(std::span<double>(&failures, 1));
    if (failures == 0.0) return;
    throw StepError{problem.empty() ? context + "another rank could not complete this step (its message is in its log)"
                                    : problem};
  }

  std::string site_of(int rank) const {
    const auto& cut = comms_.topology.site_of_rank;
    if (rank < 0 || rank >= static_cast<int>(cut.size())) return "site ?";
    return "site " + std::to_string(cut[static_cast<std::size_t>(rank)]);
  }

  void check_threads() const {
    if (recipe_.sync.overlap != outer::OverlapMode::kNone && !mpi_.threads_supported())
      throw StepError{"sync.overlap needs an MPI library with MPI_THREAD_MULTIPLE; this one offers less "
                      "(use sync.overlap = \"none\")"};
  }

  // Rank 0 owns the output folder: the effective recipe and the metrics.
  void open_output() const {
    if (!root_) return;
    try {
      std::filesystem::create_directories(recipe_.run.out_dir);
      std::ofstream(recipe_.run.out_dir + "/recipe.toml") << to_toml(recipe_);
    } catch (const std::exception& e) {
      throw StepError{"run.out_dir: cannot write to " + recipe_.run.out_dir + ": " + e.what()};
    }
  }

  void cut_sites() {
    links_ = recipe_.links.emulator();
    comms_ = make_sites(recipe_, links_);
    for (comm::Communicator* c : {comms_.world.get(), comms_.site.get(), comms_.leaders.get()})
      if (c) c->set_watchdog(&watchdog_);
  }

  // [security] key_file: the key that authenticates joins and payloads.
  void read_key() {
    if (!recipe_.security.key_file.empty()) auth_.emplace(comm::MessageAuth::from_file(recipe_.security.key_file));
  }

  // The leader joins the other sites; waits between sites then have their
  // deadline (sync.timeout_s) instead of the watchdog, and a loss is
  // recovered rather than fatal.
  void join() {
    try {
      membership_ = join_sites(recipe_, comms_, inner_loop_->model_signature(),
                               static_cast<double>(inner_loop_->tokens_per_step()), auth_ ? &*auth_ : nullptr, links_,
                               [this](const char* step) { faults_.at_phase(std::string("join-") + step, 0); });
    } catch (const comm::RunEnded& e) {
      ended_ = e.what();
      return;
    }
    if (root_ && membership_)
      std::printf("joined run \"%s\" as %s (%s): %d sites, membership epoch %d%s\n",
                  recipe_.rendezvous.run_id.c_str(), recipe_.rendezvous.site_name.c_str(),
                  membership_->joined_through().c_str(), comms_.leaders->size(), membership_->epoch(),
                  membership_->joined_late() ? " (training already under way: taking the group's state)" : "");
  }

  // Whether the group this site knocked at finished before admitting it (the
  // leader learned it at the door): then every rank of the site ends with 0.
  bool run_ended() {
    double ended = ended_.empty() ? 0.0 : 1.0;
    world_->all_reduce_sum(std::span<double>(&ended, 1));
    if (ended > 0.0 && root_) std::printf("diloco: %s\n", ended_.c_str());
    return ended > 0.0;
  }

  // The device and what carries gradients inside the site; every rank
  // decides alike, or the job stops with the reason.
  void choose_device() {
    launch_ = comm::discover_launch();
    // The GPU follows the rank's place on its node as MPI sees it; launcher
    // variables can be missing (every rank would take GPU 0) or wrong.
    const comm::NodeRank node = comm::node_rank(*world_);
    launch_.local_rank = node.rank;
    launch_.local_size = node.size;
    device_ = inner::choose_device(recipe_.devices.device, inner::cuda_device_count(), launch_.local_rank);
    device_.precision = recipe_.devices.precision;
    intra_site_ = comm::choose_intra_site(recipe_.devices.intra_site, device_.cuda, comm::nccl_built());
    intra_site_ = confirm_one_gpu_per_rank(*comms_.site, comms_.topology.site, device_, recipe_.devices.intra_site,
                                           intra_site_);
    if (device_.cuda && recipe_.devices.outer_state_on_device)
      throw std::invalid_argument(
          "outer.state_device = \"same\" is not possible on CUDA: the outer optimizer works on host memory");
  }

  void build_inner_loop() {
    // NCCL runs on libtorch's current stream for the device, where the
    // backward pass wrote the gradients it reduces.
    if (intra_site_ == comm::IntraSiteBackend::kNccl)
      gradient_comm_ = comm::make_nccl_communicator(*comms_.site, device_.index,
                                                    inner::current_cuda_stream(device_.index), &watchdog_);
    group_ = std::make_unique<outer::CommReplicaGroup>(gradient_comm_ ? *gradient_comm_ : *comms_.site, *comms_.site,
                                                       gradient_comm_ != nullptr);
    const auto& topo = comms_.topology;
    const inner::ShardSpec shard{topo.site, topo.num_sites, topo.site_rank, topo.site_size};
    const std::int64_t total_steps = static_cast<std::int64_t>(recipe_.outer.rounds) * recipe_.sync.H;
    inner_loop_ = std::make_unique<inner::InnerLoop>(recipe_.model, recipe_.inner, recipe_.data, *dataset_, shard,
                                                     *group_, static_cast<std::uint64_t>(recipe_.run.seed),
                                                     total_steps, device_);
    if (recipe_.debug.slow_site == topo.site) inner_loop_->set_slowdown(recipe_.debug.slow_factor);
  }

  void build_trainer() {
    outer::OuterParts parts;
    parts.exchange = [this](comm::Communicator& leaders) {
      auto options = exchange_options(recipe_);
      options.auth = auth_ ? &*auth_ : nullptr;
      if (recipe_.debug.forge_site == comms_.topology.site) options.forge_round = recipe_.debug.forge_round;
      return std::make_unique<outer::Exchange>(leaders, make_codec(recipe_.compression), options);
    };
    parts.optimizer = [this](std::size_t params) { return outer::make_outer_optimizer(recipe_.outer, params); };
    parts.auth = auth_ ? &*auth_ : nullptr;
    outer::CheckpointConfig checkpoint;
    checkpoint.dir = recipe_.checkpoint_dir();
    checkpoint.every = recipe_.checkpoint.every;
    checkpoint.keep = recipe_.checkpoint.keep;
    checkpoint.recipe_toml = to_toml(recipe_);
    checkpoint.model_signature = inner_loop_->model_signature();
    outer::FaultConfig faults;
    faults.nan_site = recipe_.debug.nan_site;
    faults.nan_round = recipe_.debug.nan_round;
    faults.diverge_site = recipe_.debug.diverge_site;
    faults.diverge_round = recipe_.debug.diverge_round;
    faults.at_phase = [this](const std::string& phase, int round) { faults_.at_phase(phase, round); };
    trainer_ = std::make_unique<outer::Trainer>(comms_, *inner_loop_, parts, recipe_.outer, recipe_.sync,
                                                recipe_.metrics, checkpoint, faults);
    if (rendezvous_) trainer_->use_membership(membership_.get());
  }

  // Continues from a checkpoint (outer::CheckpointError is agreed on every
  // rank by the calls themselves), and sets aside any newer one.
  void resume() {
    const std::string path = choose_resume(recipe_, resume_, *comms_.world);
    if (!path.empty()) {
      trainer_->restore(path);
      resumed_round_ = outer::CheckpointStore::round_of(path);
      if (root_) std::printf("resuming from %s (round %d)\n", path.c_str(), resumed_round_);
    }
    set_aside_abandoned(recipe_, resumed_round_, *comms_.world);
  }

  void open_metrics() {
    if (!root_) return;
    const std::string path = recipe_.run.out_dir + "/metrics.jsonl";
    try {
      if (resumed_round_ > 0) trim_metrics(path, resumed_round_);
      log_ = std::make_unique<MetricsLog>(path, resumed_round_ > 0,
                                          recipe_.observe.tensorboard ? recipe_.run.out_dir + "/tb" : "");
    } catch (const std::exception& e) {
      throw StepError{std::string("metrics: ") + e.what()};
    }
    const Peak peak = device_peak(recipe_, device_);
    const auto& m = recipe_.model;
    const double flops = m.kind == inner::ModelKind::kTorchScript
                             ? 0.0
                             : metrics::train_flops_per_token(static_cast<double>(inner_loop_->num_params()),
                                                              m.n_layers, m.d_model, m.seq_len);
    rates_.emplace(recipe_.outer.rounds, flops, peak.tflops * 1e12 * comms_.topology.site_size);
    mfu_note_ = flops > 0.0 ? peak.source : "MFU: off (a TorchScript model's FLOPs are not known)";
  }

  outer::Trainer::Hooks hooks() {
    // Live progress only on a real terminal, at most a few updates a second.
    const char* term = std::getenv("TERM");
    const bool live = root_ && isatty(STDOUT_FILENO) && term && std::string(term) != "dumb";
    outer::Trainer::Hooks hooks;
    hooks.on_step = [this, live, last = std::chrono::steady_clock::now() - std::chrono::seconds(1)](
                        int round, int step, double loss) mutable {
      faults_.at_step(inner_loop_->step());
      if (log_) log_->write_step(inner_loop_->step(), loss, inner_loop_->last_lr(), inner_loop_->last_grad_norm());
      if (!live) return;
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(250)) return;
      last = now;
      std::printf("\rround %4d/%-4d step %5d loss %6.3f", round, recipe_.outer.rounds, step + 1, loss);
      std::fflush(stdout);
    };
    // The emulated links of the round about to run (a site that joined a run
    // under way learns its round only when it starts training).
    hooks.on_round_start = [this](int round) {
      if (links_) links_->set_round(round);
    };
    hooks.on_round = [this, live](const outer::RoundMetrics& m) {
      watchdog_.set_timeout(steady_timeout(recipe_));  // start-up is over
      if (!root_) return;
      const auto rates = rates_->observe(m.round, static_cast<double>(m.tokens), m.wall_s,
                                         static_cast<double>(m.H) * static_cast<double>(inner_loop_->tokens_per_step()));
      log_->write(m, rates);
      std::printf("%s%s\n", live ? "\r\033[K" : "", round_line(m, recipe_.outer.rounds, rates).c_str());
      for (const auto& e : m.excluded)
        std::printf("  site %d left out of round %d: %s\n", e.site, m.round, outer::to_string(e.reason));
      for (const auto& c : m.membership) std::printf("  %s\n", membership_line(c, m.round).c_str());
      std::fflush(stdout);
    };
    hooks.stop_requested = [] { return stop_signal_received(); };
    return hooks;
  }

  const Recipe& recipe_;
  const std::string resume_;
  comm::MpiSession& mpi_;
  const bool root_;
  const bool rendezvous_ = recipe_.topology.join == "rendezvous";
  std::unique_ptr<comm::MpiCommunicator> world_;
  DebugFaults faults_{recipe_.debug, mpi_.world_rank(), rendezvous_ ? recipe_.rendezvous.site : -1};
  // Declared before everything that waits on other ranks, so it outlives them.
  comm::Watchdog watchdog_;
  std::optional<inner::Dataset> dataset_;
  std::shared_ptr<comm::LinkEmulator> links_;
  comm::SiteComms comms_;
  comm::LaunchInfo launch_;
  inner::DeviceConfig device_;
  comm::IntraSiteBackend intra_site_ = comm::IntraSiteBackend::kMpi;
  std::unique_ptr<comm::Communicator> gradient_comm_;
  std::unique_ptr<outer::CommReplicaGroup> group_;
  std::unique_ptr<inner::InnerLoop> inner_loop_;
  std::optional<comm::MessageAuth> auth_;          // [security] key_file
  std::unique_ptr<comm::Membership> membership_;  // site leader of a rendezvous run
  std::string ended_;  // the leader: the run ended before this site was admitted (RunEnded)
  std::unique_ptr<outer::Trainer> trainer_;
  std::unique_ptr<MetricsLog> log_;
  std::optional<metrics::RateMeter> rates_;  // rank 0
  std::string mfu_note_;                     // how the device's peak was found, for the banner
  int resumed_round_ = 0;
};

}  // namespace

inner::Dataset load_dataset(const Recipe& recipe, bool full_scan) {
  // A window is seq_len + 1 tokens; each stream must hold at least one more.
  const auto min_tokens = static_cast<std::uint64_t>(recipe.model.seq_len) + 2;
  return inner::open_dataset(recipe.data, recipe.model.vocab, min_tokens, full_scan);
}

int run_train(const Recipe& recipe, const std::string& resume, int* argc, char*** argv) {
  static comm::MpiSession mpi(argc, argv);  // ended below, or at exit
  int code = 0;
  try {
    TrainSession session(recipe, resume, mpi);
    code = session.run();
  } catch (...) {  // the session could not be built (it handles everything after)
    end_job(std::current_exception(), mpi.world_rank());
  }
  // A site that took part in a membership may hang in MPI_Finalize (what a
  // recovery abandoned): its end is bounded.
  if (recipe.topology.join == "rendezvous") comm::end_membership_process(code);
  return code;
}

}  // namespace diloco::app
