// Trainer checkpoints: world rank 0 writes the global state, each site leader
// its site's inner state; rank 0 publishes the manifest once every writer has
// succeeded, and all ranks learn the outcome together.
#include <cstring>
#include <filesystem>
#include <sstream>

#include "outer/checkpoint.h"
#include "outer/trainer.h"

namespace diloco::outer {
namespace {

// Version 2: per-fragment outer state and residuals, local params per site.
// Version 3 adds the membership epoch after the round (sites launched apart).
constexpr std::uint64_t kGlobalMagic = 0x33474C42434C4444ull;    // "DDLCBLG3"
constexpr std::uint64_t kGlobalMagicV2 = 0x32474C42434C4444ull;  // "DDLCBLG2": read, epoch 0
constexpr std::uint64_t kSiteMagic = 0x32455453434C4444ull;    // "DDLCSTE2"

std::string site_file(int site) { return "site-" + std::to_string(site) + ".bin"; }

// Rank `root`'s string on every rank.
std::string broadcast_string(comm::Communicator& comm, std::string value, int root) {
  std::uint64_t size = value.size();
  comm::broadcast_values(comm, std::span<std::uint64_t>(&size, 1), root);
  value.resize(size);
  comm.broadcast(std::as_writable_bytes(std::span<char>(value.data(), value.size())), root);
  return value;
}

// Every rank's string, on every rank; used to collect file entries and errors.
std::vector<std::string> gather_strings(comm::Communicator& comm, const std::string& mine) {
  auto raw = comm.all_gather(std::as_bytes(std::span<const char>(mine.data(), mine.size())));
  std::vector<std::string> out;
  for (const auto& r : raw) out.emplace_back(reinterpret_cast<const char*>(r.data()), r.size());
  return out;
}

// Everything global.bin holds, read in one place for restore, inspection and
// weights: every count checked against the bytes left, the end checked.
struct GlobalFile {
  std::string signature;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;  // membership epoch (sites launched apart; 0 otherwise)
  std::uint64_t sites = 0;
  double initial_eval = 0.0;
  RoundMetrics counters;  // tokens, bytes, times, exclusions
  std::vector<float> global;
  std::vector<std::pair<std::vector<float>, bool>> outer_states;  // per fragment: state, started
  std::vector<double> scheduler;
};

GlobalFile read_global_file(const std::string& path) {
  const std::string name = path + "/global.bin";
  BlobReader g(CheckpointStore::read_file(name), name);
  const auto magic = g.u64("magic");
  if (magic != kGlobalMagic && magic != kGlobalMagicV2) throw CheckpointError(name + ": not a diloco global state");
  GlobalFile f;
  f.signature = g.bytes("model signature");
  f.round = g.u64("round");
  f.epoch = magic == kGlobalMagic ? g.u64("membership epoch") : 0;
  f.sites = g.u64("site count");
  f.initial_eval = g.f64("initial eval loss");
  f.counters.tokens = static_cast<std::int64_t>(g.u64("tokens"));
  f.counters.bytes_sent = g.u64("bytes sent");
  f.counters.wall_s = g.f64("wall time");
  f.counters.compute_s = g.f64("compute time");
  f.counters.comm_s = g.f64("comm time");
  f.counters.wait_s = g.f64("wait time");
  f.counters.exposed_comm_s = g.f64("exposed comm time");
  f.counters.excluded_total = static_cast<std::int64_t>(g.u64("exclusions"));
  f.global = g.floats("global params");
  // Each fragment holds at least a value count and a flag.
  const auto fragments = g.count("fragment count", 2 * sizeof(std::uint64_t));
  for (std::uint64_t i = 0; i < fragments; ++i) {
    auto state = g.floats("outer state");
    f.outer_states.emplace_back(std::move(state), g.u64("outer started") != 0);
  }
  f.scheduler.resize(g.count("scheduler state size", sizeof(double)));
  for (auto& v : f.scheduler) v = g.f64("scheduler state");
  g.expect_end();
  return f;
}

}  // namespace

void Trainer::save_checkpoint(int round, const RoundMetrics& metrics, double initial_eval_loss) {
  comm::Communicator& world = *comms_.world;
  const auto& topo = comms_.topology;
  CheckpointStore store(checkpoint_.dir, checkpoint_.keep);
  const std::string staging = store.staging_dir(round);

  std::string problem;
  if (world.rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);
    std::filesystem::create_directories(staging, ec);
    if (ec) problem = "cannot create " + staging + ": " + ec.message();
  }
  problem = broadcast_string(world, problem, 0);
  if (!problem.empty()) throw CheckpointError(problem);

  // Each writer reports "name size crc" lines, or "!" and what went wrong.
  std::string report;
  try {
    std::vector<CheckpointFile> files;
    if (world.rank() == 0) {
      BlobWriter g;
      g.u64(kGlobalMagic);
      g.bytes(checkpoint_.model_signature);
      g.u64(static_cast<std::uint64_t>(round));
      g.u64(static_cast<std::uint64_t>(membership_ ? membership_->epoch() : 0));
      g.u64(static_cast<std::uint64_t>(topo.num_sites));
      g.f64(initial_eval_loss);
      g.u64(static_cast<std::uint64_t>(metrics.tokens));
      g.u64(metrics.bytes_sent);
      g.f64(metrics.wall_s);
      g.f64(metrics.compute_s);
      g.f64(metrics.comm_s);
      g.f64(metrics.wait_s);
      g.f64(metrics.exposed_comm_s);
      g.u64(static_cast<std::uint64_t>(metrics.excluded_total));
      g.floats(global_);
      g.u64(syncs_.size());
      for (const auto& f : syncs_) {
        g.floats(f.outer->state());
        g.u64(f.outer->started() ? 1 : 0);
      }
      const auto sched = scheduler_.state();
      g.u64(sched.size());
      for (double v : sched) g.f64(v);
      files.push_back(CheckpointStore::write_file(staging, "global.bin", g.data()));
      files.push_back(CheckpointStore::write_file(staging, "recipe.toml", checkpoint_.recipe_toml));
    }
    if (topo.is_leader()) {
      BlobWriter w;
      w.u64(kSiteMagic);
      w.u64(static_cast<std::uint64_t>(topo.site));
      w.bytes(inner_.save_state());
      w.floats(inner_.params());
      w.u64(syncs_.size());
      for (const auto& f : syncs_) w.floats(f.exchange->residual());
      files.push_back(CheckpointStore::write_file(staging, site_file(topo.site), w.data()));
    }
    for (const auto& f : files) report += f.name + " " + std::to_string(f.size) + " " + std::to_string(f.crc32c) + "\n";
  } catch (const CheckpointError& e) {
    report = std::string("!") + e.what();
  }

  const auto reports = gather_strings(world, report);
  std::string outcome;
  if (world.rank() == 0) {
    std::vector<CheckpointFile> files;
    for (const auto& r : reports) {
      if (!r.empty() && r[0] == '!') {
        outcome = r.substr(1);
        break;
      }
      std::istringstream lines(r);
      CheckpointFile f;
      while (lines >> f.name >> f.size >> f.crc32c) files.push_back(f);
    }
    try {
      if (outcome.empty()) store.publish(round, files);
    } catch (const CheckpointError& e) {
      outcome = e.what();
    }
    if (!outcome.empty()) {
      // Leave no half-written folder; earlier checkpoints are untouched.
      std::error_code ec;
      std::filesystem::remove_all(staging, ec);
    }
  }
  outcome = broadcast_string(world, outcome, 0);
  if (!outcome.empty()) throw CheckpointError("checkpoint of round " + std::to_string(round) + " failed: " + outcome);
}

void Trainer::restore(const std::string& path) {
  const auto& topo = comms_.topology;
  comm::Communicator& world = *comms_.world;
  std::string problem;
  try {
    GlobalFile g = read_global_file(path);
    if (g.signature != checkpoint_.model_signature)
      throw CheckpointError(path + " holds a model of " + g.signature + "; the recipe builds " + checkpoint_.model_signature);
    const int round = static_cast<int>(g.round);
    if (g.sites != static_cast<std::uint64_t>(topo.num_sites))
      throw CheckpointError(path + " was written by " + std::to_string(g.sites) + " sites; this run has " +
                            std::to_string(topo.num_sites) + " (topology.sites)");
    restored_initial_eval_ = g.initial_eval;
    restored_ = g.counters;
    if (g.outer_states.size() != layout_.size())
      throw CheckpointError(path + " was written with another fragment count (sync.overlap, sync.fragments)");
    const auto& global = g.global;
    const auto& outer_states = g.outer_states;
    const auto& sched = g.scheduler;
    try {
      scheduler_.load(sched);
    } catch (const std::invalid_argument& e) {
      throw CheckpointError(path + "/global.bin: " + e.what());
    }
    H_ = scheduler_.site_H(topo.site);
    if (global.size() != inner_.num_params())
      throw CheckpointError(path + " holds " + std::to_string(global.size()) + " parameters; the model has " +
                            std::to_string(inner_.num_params()));
    if (topo.is_leader()) {
      global_ = global;
      try {
        for (std::size_t i = 0; i < syncs_.size(); ++i)
          syncs_[i].outer->load_state(outer_states[i].first, outer_states[i].second);
      } catch (const std::invalid_argument& e) {
        throw CheckpointError(path + ": " + e.what() + " (outer.optimizer or outer.momentum changed?)");
      }
    }

    const std::string name = path + "/" + site_file(topo.site);
    BlobReader w(CheckpointStore::read_file(name), name);
    if (w.u64("magic") != kSiteMagic || w.u64("site") != static_cast<std::uint64_t>(topo.site))
      throw CheckpointError(name + ": not this site's state");
    try {
      inner_.load_state(w.bytes("inner state"));
    } catch (const std::runtime_error& e) {
      throw CheckpointError(name + ": " + e.what());
    }
    const auto local = w.floats("local params");
    if (local.size() != inner_.num_params()) throw CheckpointError(name + ": local params do not fit the model");
    std::memcpy(inner_.params().data(), local.data(), local.size() * sizeof(float));
    if (w.count("fragment count", sizeof(std::uint64_t)) != layout_.size())
      throw CheckpointError(name + ": another fragment count");
    std::vector<std::vector<float>> residuals;
    for (std::size_t i = 0; i < layout_.size(); ++i) residuals.push_back(w.floats("error-feedback residual"));
    w.expect_end();
    for (std::size_t i = 0; i < syncs_.size(); ++i) syncs_[i].exchange->set_residual(residuals[i]);
    start_round_ = round;
  } catch (const CheckpointError& e) {
    problem = e.what();
  }
  // All ranks resume, or none does.
  const auto problems = gather_strings(world, problem);
  for (const auto& p : problems)
    if (!p.empty()) throw CheckpointError(p);
}

}  // namespace diloco::outer

namespace diloco::outer {

std::string Trainer::describe_checkpoint(const std::string& path) {
  const GlobalFile g = read_global_file(path);
  std::ostringstream out;
  out << "model        " << g.signature << "\n";
  out << "round        " << g.round << "\n";
  out << "epoch        " << g.epoch << "\n";
  out << "sites        " << g.sites << "\n";
  out << "start eval   " << g.initial_eval << "\n";
  out << "tokens       " << g.counters.tokens << "\n";
  out << "bytes sent   " << g.counters.bytes_sent << "\n";
  out << "wall s       " << g.counters.wall_s << "\n";
  out << "exclusions   " << g.counters.excluded_total << "\n";
  out << "global params " << g.global.size() << "\n";
  out << "fragments    " << g.outer_states.size() << "\n";
  std::size_t outer_values = 0;
  for (const auto& state : g.outer_states) outer_values += state.first.size();
  out << "outer state  " << outer_values << " values\n";
  if (!g.scheduler.empty()) out << "next H       " << g.scheduler.front() << "\n";
  // Each site's file, read through as restore() reads it.
  for (const auto& f : CheckpointStore::manifest(path)) {
    if (f.name.rfind("site-", 0) != 0) continue;
    const std::string name = path + "/" + f.name;
    BlobReader w(CheckpointStore::read_file(name), name);
    if (w.u64("magic") != kSiteMagic) throw CheckpointError(name + ": not a diloco site state");
    const auto site = w.u64("site");
    const auto inner_bytes = w.bytes("inner state").size();
    const auto local = w.floats("local params").size();
    const auto residual_count = w.count("fragment count", sizeof(std::uint64_t));
    std::size_t residuals = 0;
    for (std::uint64_t i = 0; i < residual_count; ++i) residuals += w.floats("error-feedback residual").size();
    w.expect_end();
    out << "site " << site << "       " << local << " local params, inner state " << inner_bytes << " bytes, residual "
        << residuals << " values\n";
  }
  return out.str();
}

std::vector<float> Trainer::global_params_of(const std::string& path, std::string& signature) {
  GlobalFile g = read_global_file(path);
  signature = g.signature;
  return std::move(g.global);
}

}  // namespace diloco::outer
