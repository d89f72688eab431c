// A training recipe: one typed struct per TOML section, read from a file,
// overridden by --set, and validated in one place after merging
// (CLI > TOML > defaults).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/intra_site.h"
#include "comm/link_emulator.h"
#include "inner/data/dataset.h"
#include "inner/inner_loop.h"
#include "inner/model_config.h"
#include "outer/outer_optimizer.h"
#include "outer/trainer.h"

namespace diloco::app {

// Bad recipe input; main maps it to exit code 2. The message names the file
// (and line) or the --set flag, and the key.
class RecipeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunConfig {
  std::string name = "diloco";
  std::int64_t seed = 0;
  std::string out_dir = "runs/diloco";
  int threads = 1;  // intra-op threads per rank
};

// Where the inner steps and the outer state run, and what carries the
// per-step gradient all-reduce inside a site.
struct DeviceSection {
  inner::DeviceSetting device = inner::DeviceSetting::kAuto;          // run.device
  inner::Precision precision = inner::Precision::kFp32;               // inner.precision
  comm::IntraSiteSetting intra_site = comm::IntraSiteSetting::kAuto;  // comm.intra_site
  // outer.state_device: "cpu" keeps global params, outer momentum and
  // error-feedback residuals in host memory; "same" means the inner steps'
  // device, which is only possible on the CPU (the outer optimizer works on
  // host memory), so it is refused with run.device = "cuda".
  bool outer_state_on_device = false;
};

struct CompressionConfig {
  std::string codec = "none";
  int block = 256;
  bool stochastic_rounding = false;
  double topk_ratio = 0.1;
  int bits = 2;  // chunk-topk: bits per kept value, sign included (2, 4 or 8)
  // Unset means: on for lossy codecs, off for "none" (resolved at validation).
  std::optional<bool> error_feedback;
  // Share of the residual carried into the next round. Below 1 because each
  // site restarts from the global params and relearns part of what it held
  // back; carrying all of it overshoots (quickstart, topk 0.1: +6.7% eval loss
  // at 1.0, +3.5% at 0.5, against fp32).
  double error_feedback_decay = 0.5;
  std::string exchange = "auto";  // "auto" | "all_gather" | "ring"
};

struct TopologyConfig {
  int sites = 1;
  bool sites_given = false;      // topology.sites appears in the recipe (checked against site_by = "node")
  // "block": contiguous rank blocks; "node": nodes_per_site nodes per site;
  // "links": ranks joined by fast links (measured at launch, or read from
  // `cluster`) form a site, cut at the first bandwidth drop by `link_gap`.
  std::string site_by = "block";
  int nodes_per_site = 1;
  double link_gap = 4.0;
  std::string cluster;  // site_by = "links": a cluster file from `diloco probe --all-ranks`; empty: probe at launch
  std::string join = "world";     // "world": one launch holds every site; "rendezvous": each site its own launch
};

// topology.join = "rendezvous": this launch is one site that joins the run's
// other sites through ompi-server (given to mpirun, not here: mpirun's
// daemon is what talks to it).
struct RendezvousSection {
  std::string run_id;          // the run's name in the rendezvous; empty: run.name
  int site = -1;               // this site's index, 0..topology.sites-1 (its data shard); site 0 founds the group
  std::string site_name;       // empty: "site-N"
  int min_sites = 0;           // 0: a strict majority of topology.sites; round 1 waits for all, or this many after join_timeout_s
  double join_timeout_s = 120.0;
  double ping_s = 2.0;         // how long a recovery listens for the survivors
};

// Fail-fast deadlines for any wait on another rank (torchtitan keeps start-up
// and steady state apart: start-up includes loading data on every rank).
struct TimeoutSection {
  double timeout_s = 300.0;
  double startup_timeout_s = 600.0;
};

// Test-only fault injection; every knob is off by default.
struct DebugSection {
  int nan_site = -1;     // this site's pseudo-gradient becomes NaN in nan_round
  int nan_round = 0;
  int diverge_site = -1;  // this site's global params drift by one ulp after the outer step...
  int diverge_round = 0;  // ...of this round (what sync.check_every must catch)
  int exit_rank = -1;    // this world rank exits (code 1) at inner step exit_step
  std::int64_t exit_step = 0;
  int throw_rank = -1;   // this world rank fails with an internal error at inner step throw_step
  std::int64_t throw_step = 0;
  int freeze_rank = -1;  // this world rank stops itself (SIGSTOP) at freeze_step
  std::int64_t freeze_step = 0;
  int slow_site = -1;        // every rank of this site steps slow_factor times slower
  double slow_factor = 1.0;
  int forge_site = -1;       // this site's payload tags are forged (made without the key)...
  int forge_round = 0;       // ...in this round ([security] key_file)
  // Sites launched apart: this site's leader is killed ("kill"), stops
  // ("stop", SIGSTOP), gives up ("exit", code 2) or has a wait run out
  // ("timeout": a loss noticed where nobody was lost) at a phase of a round
  // ("inner", "exchange", "exchanged", "admission", "recovery") or of
  // joining ("join-hello", ... "join-merged"); see app/debug_faults.h.
  int fault_site = -1;
  std::string fault_signal = "kill";
  std::string fault_phase;
  int fault_round = 0;
};

// Authentication between sites.
struct SecuritySection {
  std::string key_file;  // a shared key (16+ bytes); empty: the traffic between sites is unauthenticated
};

// Emulated links between sites (empty arrays: none), one entry per site.
struct LinksSection {
  std::vector<double> latency_ms;
  std::vector<double> bandwidth_mbps;  // 0: unlimited
  std::vector<comm::LinkChange> changes;
  bool enabled() const { return !latency_ms.empty() || !bandwidth_mbps.empty(); }
  std::vector<comm::SiteLink> sites() const;
  // The emulator for these links (nullptr when none are configured); a change
  // that omits latency or bandwidth keeps the site's configured value.
  std::shared_ptr<comm::LinkEmulator> emulator() const;
};

// What a run shows besides metrics.jsonl ([metrics] keys).
struct ObserveSection {
  bool tensorboard = false;  // metrics.tensorboard: TensorBoard event files in OUT/tb
  double peak_tflops = 0.0;  // metrics.peak_tflops: one device's dense peak; 0: a GPU's from its name, none on CPU
};

struct CheckpointSection {
  std::string dir;  // empty: OUT/checkpoints
  int every = 0;    // 0: only when a stop signal arrives
  int keep = 3;
};

// Where a model comes from besides its sizes.
struct ModelSourceSection {
  std::string preset;     // model.preset: the named size the model.* keys start from ("" for none)
  std::string init_from;  // model.init_from: weights for round 1 (a safetensors file or a checkpoint folder; "" for none)
};

struct Recipe {
  RunConfig run;
  DeviceSection devices;
  inner::ModelConfig model;
  ModelSourceSection model_source;
  inner::DataConfig data;
  inner::InnerOptimConfig inner;
  outer::OuterConfig outer;
  outer::SyncConfig sync;
  CompressionConfig compression;
  TopologyConfig topology;
  RendezvousSection rendezvous;
  SecuritySection security;
  outer::EvalConfig metrics;
  ObserveSection observe;  // the other [metrics] keys
  CheckpointSection checkpoint;
  LinksSection links;
  TimeoutSection timeouts;  // recipe keys sync.timeout_s, sync.startup_timeout_s
  DebugSection debug;
  double max_update_norm_ratio = 10.0;  // recipe key outer.max_update_norm_ratio; 0 turns it off

  // checkpoint.dir, or OUT/checkpoints when it is empty.
  std::string checkpoint_dir() const { return checkpoint.dir.empty() ? run.out_dir + "/checkpoints" : checkpoint.dir; }
};

// Parses `path`, applies `overrides` ("section.key=value", value in TOML
// syntax or a bare string) and validates everything. Throws RecipeError.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides);

// The same from TOML text; `source` names it in messages.
Recipe parse_recipe(const std::string& toml_text, const std::string& source,
                    const std::vector<std::string>& overrides);

// The effective recipe as TOML, every key present.
std::string to_toml(const Recipe& recipe);

// The default corpus: the plain-text files of Debian's fortunes package.
inline constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";

}  // namespace diloco::app
