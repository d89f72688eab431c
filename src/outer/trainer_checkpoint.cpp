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
constexpr std::uint64_t kGlobalMagic = 0x32474C42434C4444ull;  // "DDLCBLG2"
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
    BlobReader g(CheckpointStore::read_file(path + "/global.bin"), path + "/global.bin");
    if (g.u64("magic") != kGlobalMagic) throw CheckpointError(path + "/global.bin: not a diloco global state");
    const std::string signature = g.bytes("model signature");
    if (signature != checkpoint_.model_signature)
      throw CheckpointError(path + " holds a model of " + signature + "; the recipe builds " + checkpoint_.model_signature);
    const int round = static_cast<int>(g.u64("round"));
    const auto sites = g.u64("site count");
    if (sites != static_cast<std::uint64_t>(topo.num_sites))
      throw CheckpointError(path + " was written by " + std::to_string(sites) + " sites; this run has " +
                            std::to_string(topo.num_sites) + " (topology.sites)");
    restored_initial_eval_ = g.f64("initial eval loss");
    restored_.tokens = static_cast<std::int64_t>(g.u64("tokens"));
    restored_.bytes_sent = g.u64("bytes sent");
    restored_.wall_s = g.f64("wall time");
    restored_.compute_s = g.f64("compute time");
    restored_.comm_s = g.f64("comm time");
    restored_.wait_s = g.f64("wait time");
    restored_.exposed_comm_s = g.f64("exposed comm time");
    restored_.excluded_total = static_cast<std::int64_t>(g.u64("exclusions"));
    const auto global = g.floats("global params");
    if (g.count("fragment count", 2 * sizeof(std::uint64_t)) != layout_.size())
      throw CheckpointError(path + " was written with another fragment count (sync.overlap, sync.fragments)");
    std::vector<std::pair<std::vector<float>, bool>> outer_states;
    for (std::size_t i = 0; i < layout_.size(); ++i) {
      auto state = g.floats("outer state");
      outer_states.emplace_back(std::move(state), g.u64("outer started") != 0);
    }
    std::vector<double> sched(g.count("scheduler state size", sizeof(double)));
    for (auto& v : sched) v = g.f64("scheduler state");
    g.expect_end();
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
  BlobReader g(CheckpointStore::read_file(path + "/global.bin"), path + "/global.bin");
  if (g.u64("magic") != kGlobalMagic) throw CheckpointError(path + "/global.bin: not a diloco global state");
  std::ostringstream out;
  out << "model        " << g.bytes("model signature") << "\n";
  out << "round        " << g.u64("round") << "\n";
  out << "sites        " << g.u64("site count") << "\n";
  out << "start eval   " << g.f64("initial eval loss") << "\n";
  out << "tokens       " << g.u64("tokens") << "\n";
  out << "bytes sent   " << g.u64("bytes sent") << "\n";
  out << "wall s       " << g.f64("wall time") << "\n";
  g.f64("compute time");
  g.f64("comm time");
  g.f64("wait time");
  g.f64("exposed comm time");
  out << "exclusions   " << g.u64("exclusions") << "\n";
  out << "global params " << g.floats("global params").size() << "\n";
  // Each fragment holds at least a value count and a flag.
  const auto fragments = g.count("fragment count", 2 * sizeof(std::uint64_t));
  out << "fragments    " << fragments << "\n";
  std::size_t outer_values = 0;
  for (std::uint64_t i = 0; i < fragments; ++i) {
    outer_values += g.floats("outer state").size();
    g.u64("outer started");
  }
  out << "outer state  " << outer_values << " values\n";
  const auto sched_size = g.count("scheduler state size", sizeof(double));
  for (std::uint64_t i = 0; i < sched_size; ++i) {
    const double v = g.f64("scheduler state");
    if (i == 0) out << "next H       " << v << "\n";
  }
  g.expect_end();
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

}  // namespace diloco::outer
