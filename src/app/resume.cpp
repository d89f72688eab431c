// Resume: the checkpoint to continue from, the abandoned future set aside,
// metrics cut back to it.
#include "app/resume.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "outer/checkpoint.h"
#include "outer/trainer.h"

namespace diloco::app {
namespace {

// Rank 0's string on every rank.
std::string from_rank0(comm::Communicator& world, std::string value) {
  std::uint64_t size = value.size();
  comm::broadcast_values(world, std::span<std::uint64_t>(&size, 1), 0);
  value.resize(size);
  world.broadcast(std::as_writable_bytes(std::span<char>(value.data(), value.size())), 0);
  return value;
}

// Empty when every file of the checkpoint parses; else why not.
std::string parses(const std::string& path) {
  try {
    outer::Trainer::describe_checkpoint(path);
  } catch (const outer::CheckpointError& e) {
    return e.what();
  }
  return {};
}

// The round of a metrics row, or -1 when the row does not parse (a row torn
// by a crash).
long row_round(const std::string& line) {
  const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!row.is_object() || !row.contains("round") || !row["round"].is_number_integer()) return -1;
  const auto round = row["round"].get<long>();
  return round < 0 ? -1 : round;
}

}  // namespace

std::string choose_resume(const Recipe& recipe, const std::string& resume, comm::Communicator& world) {
  std::string path;
  std::string problem;
  if (world.rank() == 0 && resume != "none") {
    outer::CheckpointStore store(recipe.checkpoint_dir(), recipe.checkpoint.keep);
    if (resume == "auto") {
      std::vector<std::string> warnings;
      if (auto found = store.newest_valid(warnings, parses)) path = *found;
      for (const auto& w : warnings) std::cerr << "diloco: warning: " << w << std::endl;
      if (path.empty()) std::printf("no usable checkpoint in %s: starting fresh\n", store.dir().c_str());
    } else {
      path = resume;
      problem = outer::CheckpointStore::verify(path);
      if (problem.empty()) problem = parses(path);
      if (!problem.empty()) problem = "--resume " + path + ": " + problem;
    }
  }
  problem = from_rank0(world, problem);
  path = from_rank0(world, path);
  if (!problem.empty()) throw outer::CheckpointError(problem);
  return path;
}

void set_aside_abandoned(const Recipe& recipe, int round, comm::Communicator& world) {
  std::string problem;
  if (world.rank() == 0) {
    try {
      const std::string folder = outer::CheckpointStore(recipe.checkpoint_dir(), recipe.checkpoint.keep)
                                     .set_aside_newer_than(round);
      if (!folder.empty())
        std::printf("checkpoints newer than round %d belong to an abandoned run: moved to %s\n", round,
                    folder.c_str());
    } catch (const outer::CheckpointError& e) {
      problem = e.what();
    }
  }
  problem = from_rank0(world, problem);
  if (!problem.empty()) throw outer::CheckpointError(problem);
}

void trim_metrics(const std::string& path, int round) {
  std::ifstream in(path);
  std::string kept;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const long r = row_round(line);
    if (r < 0) {
      std::cerr << "diloco: warning: " << path << ":" << line_number
                << ": dropped a metrics row that does not parse (torn by a crash?)" << std::endl;
      continue;
    }
    if (r <= round) kept += line + "\n";
  }
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    out.flush();
    if (!out) throw outer::CheckpointError("cannot rewrite " + path + " (through " + tmp + ")");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw outer::CheckpointError("cannot replace " + path + ": " + ec.message());
}

}  // namespace diloco::app
