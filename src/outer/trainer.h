// The round loop that composes an inner loop, an exchange and an outer
// optimizer: DiLoCo (Douillard et al. 2023), one outer step per round.
#pragma once

#include <cstdint>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm_thread.h"
#include "comm/link_probe.h"
#include "comm/membership.h"
#include "comm/topology.h"
#include "inner/inner_loop.h"
#include "outer/data_parallel.h"
#include "outer/exchange.h"
#include "outer/fragments.h"
#include "outer/group_state.h"
#include "outer/link_tracker.h"
#include "outer/outer_optimizer.h"
#include "outer/scheduler.h"

namespace diloco::outer {

// How the exchange between sites relates to the inner steps.
enum class OverlapMode {
  kNone,       // blocking: compute stops while the exchange runs
  kDelayed,    // one-step delay: round r's exchange travels during round r+1
  kStreaming,  // Streaming DiLoCo: fragments synced at staggered steps, each overlapping tau steps
};

// What crosses the links between sites.
enum class SyncMode {
  kDiLoCo,        // pseudo-gradients every H inner steps, then the outer step
  kDataParallel,  // every inner step's gradients (one model, AdamW applied identically everywhere)
};

struct SyncConfig {
  SyncMode mode = SyncMode::kDiLoCo;
  int H = 50;  // inner steps per round (the first round's, when scheduled); data-parallel: steps per report
  OverlapMode overlap = OverlapMode::kNone;
  int fragments = 1;       // streaming: contiguous groups of layers synced in turn
  int overlap_steps = 0;   // streaming: inner steps (tau) each fragment's exchange overlaps
  // streaming: after its exchange a fragment becomes alpha * local + (1 - alpha) * global
  // (Streaming DiLoCo studies 0.5; 0 takes the global fragment, as blocking DiLoCo does).
  double mix_alpha = 0.5;
  // The schedule's recipe keys; schedule() assembles the scheduler's config.
  ScheduleMode schedule_mode = ScheduleMode::kFixed;
  int h_min = 1;
  int h_max = 100000;
  double target_comm_share = 0.05;
  double hysteresis = 0.2;
  int reprobe_every = 0;  // probe the links between leaders after every this many rounds; 0: never
  // Compare a hash of the global params across site leaders after every
  // this many rounds (carried in the round's report: no extra message);
  // 0: never. A mismatch stops the run naming the sites that differ.
  int check_every = 1;

  ScheduleConfig schedule() const {
    ScheduleConfig c;
    c.mode = schedule_mode;
    c.h_min = h_min;
    c.h_max = h_max;
    c.target_comm_share = target_comm_share;
    c.hysteresis = hysteresis;
    c.overlapped = overlap == OverlapMode::kDelayed;
    return c;
  }
};

// Test-only fault injection ([debug] in a recipe), on real code paths.
struct FaultConfig {
  int nan_site = -1;   // this site's pseudo-gradient becomes NaN...
  int nan_round = 0;   // ...in this round
  int diverge_site = -1;  // this site's global params drift by one ulp after the outer step...
  int diverge_round = 0;  // ...of this round
  // Sites launched apart: called on a site leader at each phase of a round
  // ("inner": halfway through its steps; "exchange"; "admission"; "recovery":
  // entering one), where a test may kill or stop the process.
  std::function<void(const std::string& phase, int round)> at_phase;
};

struct EvalConfig {
  int every = 1;      // evaluate every this many rounds (and always on the last)
  int windows = 64;   // held-out windows per evaluation
};

// One row of metrics; only world rank 0 holds the cross-site fields.
struct RoundMetrics {
  int round = 0;
  int H = 0;
  double train_loss = 0.0;
  std::optional<double> eval_loss;
  std::int64_t tokens = 0;        // cumulative, all sites
  std::uint64_t bytes_sent = 0;   // cumulative, sent between sites by all leaders
  double wall_s = 0.0;
  double compute_s = 0.0;         // inner steps, cumulative
  double comm_s = 0.0;            // exchanges (on whichever thread), outer steps and adoption, cumulative, less wait_s
  double exposed_comm_s = 0.0;    // the part of comm_s compute waited on, cumulative (= comm_s when blocking)
  double wait_s = 0.0;            // time spent waiting for slower sites at a blocking exchange, cumulative
  double comm_share = 0.0;            // this round: exposed comm time / round time, measured
  double utilization = 0.0;           // this round: compute time / round time
  std::uint64_t peak_exchange_bytes = 0;  // this round: bytes rank 0's leader sent in its largest single exchange
  double predicted_comm_share = 0.0;  // what the plan expected for this round (0 before any measurement)
  double step_s = 0.0;                // slowest site's mean inner step this round
  double sync_s = 0.0;                // the quickest leader's exchange time this round (no straggler wait)
  int next_H = 0;                     // H the schedule chose for the next round (this site)
  std::vector<int> site_steps;        // inner steps each site ran this round
  std::vector<double> site_step_s;    // each site's mean inner step this round
  std::vector<double> site_exchange_s;  // each site leader's exchange this round (its wait for the others in it)
  std::vector<int> next_site_H;       // H the schedule chose for each site's next round
  std::optional<comm::LinkEstimate> link;  // passive estimate of the exchange's bottleneck link
  std::vector<std::vector<comm::LinkEstimate>> probed;  // the link matrix, in rounds that re-probed
  std::vector<ExcludedSite> excluded;  // sites left out of this round's average, with why
  std::int64_t excluded_total = 0;     // cumulative count of exclusions
  // Sites launched apart (topology.join = "rendezvous"): the membership
  // epoch and size after this round, and what changed during it.
  int epoch = 0;
  int members = 0;
  std::vector<comm::MembershipChange> membership;
  // The first round of a site that joined a group already training: what
  // it took the group's state at (round), and its error-feedback residual
  // as it read it then: the values it held before (its own checkpoint's)
  // and after taking the state (none: docs/membership.md, "Overlap").
  struct TookState {
    std::int64_t round = 0;
    std::size_t residual_before = 0, residual_after = 0;  // values, over every fragment
    double residual_rms_before = 0.0;
  };
  std::optional<TookState> took_state;
};

struct CheckpointConfig {
  std::string dir;          // empty: no checkpoints
  int every = 0;            // rounds between checkpoints; 0 writes only on a stop request
  int keep = 3;
  std::string recipe_toml;  // saved beside the state, for inspection
  std::string model_signature;  // a checkpoint for another model is refused
};

struct RunSummary {
  double initial_eval_loss = 0.0;
  double final_eval_loss = 0.0;
  int rounds = 0;
  std::int64_t inner_steps = 0;   // per site
  std::uint64_t bytes_sent = 0;
  double wall_s = 0.0;
  bool stopped = false;           // a stop request ended the run early
  int resumed_from = 0;           // round of the checkpoint resumed from, 0 if fresh
};

// How a site leader builds the pieces it needs once per fragment (streaming
// syncs each fragment with its own codec state and outer momentum).
struct OuterParts {
  std::function<std::unique_ptr<Exchange>(comm::Communicator& leaders)> exchange;
  std::function<std::unique_ptr<OuterOptimizer>(std::size_t params)> optimizer;
  // With a key ([security] key_file): the round reports and the group state
  // sent to a site that joins or falls behind carry an HMAC, checked on
  // arrival (a failure stops the site, exit 3).
  const comm::MessageAuth* auth = nullptr;
};

// Adapts a site's communicators to the inner loop's replica group: the
// per-step gradient sums go over `gradients` (NCCL on device memory, or the
// site's MPI communicator), the small host-side sums (eval totals) over `site`.
class CommReplicaGroup final : public inner::ReplicaGroup {
 public:
  explicit CommReplicaGroup(comm::Communicator& site) : gradients_(site), site_(site) {}
  CommReplicaGroup(comm::Communicator& gradients, comm::Communicator& site, bool device_memory)
      : gradients_(gradients), site_(site), device_memory_(device_memory) {}
  int rank() const override { return site_.rank(); }
  int size() const override { return site_.size(); }
  void sum(std::span<float> values) override { gradients_.all_reduce_sum(values); }
  void sum(std::span<double> values) override { site_.all_reduce_sum(values); }
  bool reduces_device_memory() const override { return device_memory_; }

 private:
  comm::Communicator& gradients_;
  comm::Communicator& site_;
  bool device_memory_ = false;
};

class Trainer {
 public:
  struct Hooks {
    std::function<void(int round)> on_round_start;          // every rank, before each round's inner steps
    std::function<void(const RoundMetrics&)> on_round;      // every rank, after each round
    std::function<void(int round, int step, double loss)> on_step;  // every rank, inner steps
    // Polled at each round boundary on every rank; if any rank says yes, all
    // ranks checkpoint and stop together.
    std::function<bool()> stop_requested;
  };

  // `parts` is used on site leaders only. Throws std::invalid_argument when
  // the sync settings do not fit the model (more fragments than layers) or
  // each other (data-parallel with overlap or a scheduled H). Data-parallel
  // installs its gradient sync in `inner` for the trainer's lifetime.
  Trainer(comm::SiteComms& comms, inner::InnerLoop& inner, const OuterParts& parts, const OuterConfig& outer_config,
          const SyncConfig& sync, const EvalConfig& eval, CheckpointConfig checkpoint = {}, FaultConfig faults = {});
  ~Trainer();

  // Loads a checkpoint folder (every rank, before run()); throws CheckpointError.
  void restore(const std::string& path);

  // What a checkpoint folder holds, as lines of text; throws CheckpointError
  // when its global state cannot be read.
  static std::string describe_checkpoint(const std::string& path);
  // A checkpoint's global parameters and the signature of their model
  // (weights to start from); throws CheckpointError.
  static std::vector<float> global_params_of(const std::string& path, std::string& signature);

  RunSummary run(const Hooks& hooks);

  // Sites launched apart: every rank calls it before run(), site leaders
  // with the membership (others nullptr). Round 1 then starts from rank 0's
  // state, a site that joins late from the group's current state, a lost
  // site's round is redone by the survivors, newcomers are admitted after
  // each round, and a site left in a minority checkpoints and throws
  // comm::MinorityError on all its ranks. Delayed overlap: an exchange in
  // flight at a change of membership is sent again by every survivor, and
  // a round drains before an admission; streaming: a fragment's exchange
  // is sent again by every survivor unless one applied it, whose state the
  // others then take (docs/membership.md, "Overlap"); data-parallel: a
  // step's exchange likewise, inside the step.
  void use_membership(comm::Membership* leader_membership);

  // The global parameters after the last outer step (site leaders only).
  std::span<const float> global_params() const { return global_; }
  const std::vector<Fragment>& fragments() const { return layout_; }

 private:
  // One fragment's sync state on a site leader (the whole model unless streaming).
  struct FragmentSync {
    Fragment span;
    std::unique_ptr<Exchange> exchange;
    std::unique_ptr<OuterOptimizer> outer;
    std::vector<float> delta;      // pseudo-gradient in flight, then its average
    std::future<void> in_flight;   // the comm thread's exchange of `delta`
    ExchangeStats stats;           // written by that exchange
    SiteUpdate update;             // what was sent with it
    // Sites launched apart, overlapped: what the exchange in flight went out
    // with, until its result is applied, so a change of membership can have
    // it sent again (every survivor does, over the survivors).
    struct Resend {
      std::vector<float> delta;     // the pseudo-gradient as sent
      std::vector<float> residual;  // the error-feedback residual before it
      SiteUpdate update;
      std::int64_t seed_round = 0;
      bool again = false;           // to be sent again before its result is used
    };
    std::optional<Resend> resend;
  };

  // What this round's exchanges cost and did, on this leader.
  struct RoundSync {
    ExchangeStats last;            // the most recent exchange (timing fields summed over the round)
    double exchange_s = 0.0;       // exchanges, wherever they ran
    double exposed_s = 0.0;        // main-thread time not computing because of sync
    double blocked_s = 0.0;        // the part of it spent waiting for an exchange to arrive
    double agree_s = 0.0;          // the quickest weight agreement (a tiny gather) of the round's exchanges
    std::uint64_t peak_bytes = 0;
    std::vector<ExcludedSite> excluded;
    void add(const ExchangeStats& s);
  };

  struct SiteReport {
    double mean_loss = 0.0;
    double tokens = 0.0;
    double bytes_sent = 0.0;
    double step_s = 0.0;      // mean inner step of this site
    double exchange_s = 0.0;  // this leader's exchange time
    double report_s = 0.0;    // this leader's previous report gather
    double agree_s = 0.0;     // this leader's quickest weight agreement this round
    double steps = 0.0;       // inner steps this round
    double transfer_s = 0.0;  // the payload transfers of this leader's exchange
    double transfer_messages = 0.0;
    double critical_bytes = 0.0;
    double round = 0.0;        // the round this report is of: every leader's must match
    double params_hash = -1.0; // CRC-32C of the global params in checked rounds, -1 otherwise
    double busy_s = 0.0;       // the longest this leader went without answering an alarm so far
    double knocks = 0.0;       // the door's keeper: newcomers queued (delayed overlap drains the next round)
  };

  inner::InnerStats run_steps(int round, int steps, int first_step, const Hooks& hooks);
  inner::InnerStats run_streaming_round(int round, const Hooks& hooks, RoundSync& sync);
  void sync_blocking(const inner::InnerStats& stats, int round, RoundSync& sync);
  // `adopted`: this site took the group's state of `round` after a loss
  // (its previous exchange is in it): the round's own part only.
  void sync_delayed(const inner::InnerStats& stats, int round, bool drain, RoundSync& sync, bool adopted = false);
  // Fragment f's pseudo-gradient goes out: on the comm thread, or right here
  // when `blocking`; finish() waits for it and applies the outer step.
  void launch(FragmentSync& f, const SiteUpdate& update, int round, std::int64_t seed_round, bool blocking);
  void send(FragmentSync& f, std::int64_t seed_round, bool blocking);
  void at_phase(const char* phase, int round) const;
  void inject_faults(std::span<float> delta, int round) const;
  void sync_round(const inner::InnerStats& stats, int round, bool last, bool checkpoint_now, RoundSync& sync,
                  RoundMetrics& metrics);
  // Membership (trainer_membership.cpp).
  void inject_divergence(int round);
  bool checked_round(int round) const;
  double params_hash() const;
  void check_reports(const std::vector<SiteReport>& all, const SiteReport& mine) const;
  // Keyed runs: appends this site's HMAC over `bytes` under `context`, and
  // checks and strips `sender`'s (false when it fails). No-ops without a key.
  void seal(std::vector<std::byte>& bytes, const std::string& context) const;
  bool unseal(std::vector<std::byte>& bytes, const std::string& context) const;
  std::string sealing_context(const char* kind, std::int64_t round, int sender) const;
  std::string leader_name(int rank) const;
  void start_from_group();
  void redo_on_loss(const std::function<void()>& once, const std::function<void()>& adopted, RoundSync& sync,
                    RoundMetrics& metrics);
  void admit_newcomers(int round, RoundMetrics& metrics);
  enum class AfterLoss { kRedo, kAdopted, kStop };
  AfterLoss recover_or_stop(std::string why, RoundMetrics& metrics);
  bool settle(const comm::MembershipChange& change);
  void answer_alarm();
  void stay_in_group(int round, const RoundMetrics& metrics, double initial_eval_loss);
  std::vector<std::byte> group_state(int round) const;
  GroupStateShape group_state_shape() const;
  int load_group_state(std::span<const std::byte> bytes, bool take_step, bool keep_local);
  void send_group_state(int round, const std::vector<int>& to);
  int receive_group_state(int from, bool take_step, bool keep_local);
  void finish(FragmentSync& f, RoundSync& sync);
  // An exchange in flight across changes of membership (trainer_in_flight.cpp).
  void keep_for_resend(FragmentSync& f, std::int64_t seed_round);
  void wait_in_flight(FragmentSync& f);
  void quiesce();
  void resend(FragmentSync& f, bool blocking);
  // Streaming between sites launched apart: fragment i's exchange ends and
  // is applied (sent again after a loss, or taken from a survivor that
  // applied it); a site behind mixes in the fragments it missed.
  void finish_fragment(std::size_t i, int round, RoundSync& sync);
  void take_missed_fragments(const comm::MembershipChange& change);
  void mix_fragment(const FragmentSync& f);
  // Data parallelism between sites launched apart (trainer_data_parallel.cpp).
  class StepRecovery;
  void use_step_recovery();
  void send_step_average(const std::vector<int>& to);
  void receive_step_average(int from);
  bool overlapped_membership() const { return membership_ && sync_.overlap != OverlapMode::kNone; }
  bool delayed_membership() const { return membership_ && sync_.overlap == OverlapMode::kDelayed; }
  void report(const inner::InnerStats& stats, const RoundSync& sync, RoundMetrics& metrics);
  void install_data_parallel(Exchange* exchange);
  double collect_data_parallel(RoundSync& sync);
  void adopt_global();
  void adopt_fragment(const Fragment& f);
  void share_next_H(RoundMetrics& metrics);
  void reprobe(RoundMetrics& metrics, bool group_changed);
  // This site's index in the schedule's per-site plan: its site (one
  // mpirun) or its rank among the leaders (sites launched apart).
  int plan_index() const;
  bool agree_stop(const Hooks& hooks);
  void save_checkpoint(int round, const RoundMetrics& metrics, double initial_eval_loss);

  comm::SiteComms& comms_;
  inner::InnerLoop& inner_;
  const comm::MessageAuth* auth_ = nullptr;  // keyed runs: seals reports and group states
  OuterConfig outer_config_;
  SyncConfig sync_;
  EvalConfig eval_;
  CheckpointConfig checkpoint_;
  FaultConfig faults_;
  int start_round_ = 0;
  RoundMetrics restored_;
  std::optional<RoundMetrics::TookState> took_state_;  // a site that joined late (start_from_group)
  double restored_initial_eval_ = 0.0;
  std::vector<float> global_;
  std::vector<Fragment> layout_;
  std::vector<FragmentSync> syncs_;     // leaders: one per fragment
  std::unique_ptr<comm::Communicator> exchange_comm_;  // leaders, overlap modes: the comm thread's
  std::unique_ptr<comm::CommThread> comm_thread_;
  std::unique_ptr<DataParallelSync> data_parallel_;  // data-parallel mode only
  std::vector<float> round_start_;      // delayed: local params when the round began
  std::int64_t tokens_per_step_ = 0;
  std::uint64_t exchanged_bytes_ = 0;   // sent by the comm thread's exchanges that finished
  std::chrono::steady_clock::time_point run_start_;
  Scheduler scheduler_;
  LinkTracker link_tracker_;
  int H_;  // this site's inner steps in the coming round
  int planned_epoch_ = -1;  // sites launched apart: the membership epoch the schedule's per-site history is of
  double last_report_s_ = 0.0;
  // Sites launched apart: when this leader last could answer an alarm, and
  // the longest it went without (an inner step, an evaluation, a checkpoint
  // save), which the members share so a recovery waits for it.
  std::chrono::steady_clock::time_point heard_at_ = std::chrono::steady_clock::now();
  double busy_s_ = 0.0;
  double wait_this_round_ = 0.0;
  bool rendezvous_ = false;
  comm::Membership* membership_ = nullptr;  // site leaders of a rendezvous run
  std::int64_t admitted_round_ = -1;        // the round whose admission is done (here or, found by a recovery, elsewhere)
  RoundMetrics between_steps_;              // membership changes answered between inner steps
  std::string minority_;                    // why this site must stop (leader), empty while in the group
  // Delayed overlap between sites launched apart: the last report said a
  // newcomer is queued, so the next round drains and admits it; whether
  // this round does (its report then announces nobody: whoever is queued
  // is admitted right after it). Never set with blocking DiLoCo or
  // streaming, which admit after every round (nothing is in flight then).
  bool admit_next_ = false;
  bool admitting_now_ = false;
  // Streaming: fragments of this round applied, as the membership's
  // progress says (set_parts_done).
  int parts_done_ = 0;
  // Data parallelism between sites launched apart: inner steps of this
  // round applied (the membership's progress), the last step's average
  // (sent to a survivor behind, or taken from one ahead), and the hooks
  // its gradient sync recovers through.
  int steps_done_ = 0;
  std::vector<float> step_average_;
  std::unique_ptr<DataParallelSync::Recovery> step_recovery_;
};

}  // namespace diloco::outer
