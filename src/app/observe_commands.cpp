// `diloco status` prints a run's latest round as the live line does;
// `diloco report` writes the page comparing runs and prints its summary.
#include "app/observe_commands.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

// Run folders may hold commas.
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>

#include "app/recipe.h"
#include "app/train_report.h"
#include "metrics/report_page.h"

namespace diloco::app {
namespace {

constexpr int kBadInput = 2;

using Row = nlohmann::ordered_json;

double number(const Row& row, const char* key, double otherwise = 0.0) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::optional<double> maybe(const Row& row, const char* key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
}

// The row as the trainer reported it, for the same line `diloco train` prints.
outer::RoundMetrics round_of(const Row& row) {
  outer::RoundMetrics m;
  m.round = static_cast<int>(number(row, "round"));
  m.H = static_cast<int>(number(row, "H"));
  m.train_loss = number(row, "train_loss");
  m.eval_loss = maybe(row, "eval_loss");
  m.tokens = static_cast<std::int64_t>(number(row, "tokens"));
  m.bytes_sent = static_cast<std::uint64_t>(number(row, "bytes_sent"));
  m.comm_s = number(row, "comm_s");
  m.wall_s = number(row, "wall_s");
  return m;
}

// outer.rounds of the run's effective recipe (0 if it cannot be read).
int planned_rounds(const std::string& dir) {
  try {
    return load_recipe(dir + "/recipe.toml", {}).outer.rounds;
  } catch (const std::exception&) {
    return 0;
  }
}

std::string state_of(const metrics::RunRows& run, int rounds) {
  const int last = static_cast<int>(number(run.rows.back(), "round"));
  if (rounds > 0 && last >= rounds) return "finished";
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(run.dir + "/metrics.jsonl", ec);
  if (ec) return "not finished";
  const double ago = std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - written).count();
  char buf[80];
  std::snprintf(buf, sizeof(buf), "not finished: last round written %.0f s ago", ago);
  return buf;
}

void print_status(const metrics::RunRows& run) {
  const int rounds = planned_rounds(run.dir);
  if (run.rows.empty()) {
    std::printf("%s: no round finished yet\n", run.name.c_str());
    return;
  }
  const Row& row = run.rows.back();
  const metrics::Rates rates{maybe(row, "tokens_per_s"), maybe(row, "mfu"), maybe(row, "eta_s")};
  std::printf("%s (%s)\n  %s\n", run.name.c_str(), state_of(run, rounds).c_str(),
              round_line(round_of(row), rounds, rounds > 0 && number(row, "round") >= rounds
                                                   ? metrics::Rates{rates.tokens_per_s, rates.mfu, std::nullopt}
                                                   : rates).c_str());
  if (const auto members = maybe(row, "members"))
    std::printf("  membership epoch %.0f, %.0f sites\n", number(row, "epoch"), *members);
}

}  // namespace

int run_status(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]).rfind("-", 0) == 0) {
    if (argc == 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h")) {
      std::cout << "usage: diloco status RUN_DIR\nThe latest round of a running or finished run (run.out_dir), "
                   "for every site of sites launched apart (RUN_DIR/SITE/metrics.jsonl).\n";
      return 0;
    }
    std::cerr << "diloco: error: usage: diloco status RUN_DIR\n";
    return kBadInput;
  }
  try {
    for (const auto& run : metrics::load_runs(argv[2])) print_status(run);
  } catch (const metrics::RunError& e) {
    std::cerr << "diloco: error: " << e.what() << "\n";
    return kBadInput;
  }
  std::fflush(stdout);
  return 0;
}

int run_report(int argc, char** argv) {
  cxxopts::Options options("diloco report", "One self-contained HTML page comparing runs (each a run.out_dir; the "
                                            "first is the baseline of the to-target columns).");
  options.positional_help("RUN_DIR...");
  options.add_options()("runs", "run folders", cxxopts::value<std::vector<std::string>>())(
      "out", "the HTML file to write", cxxopts::value<std::string>())(
      "title", "the page's title", cxxopts::value<std::string>()->default_value("diloco report"))("h,help", "show this help");
  options.parse_positional({"runs"});
  try {
    const auto args = options.parse(argc - 1, argv + 1);
    if (args.count("help")) {
      std::cout << options.help();
      return 0;
    }
    if (!args.count("runs")) throw cxxopts::exceptions::exception("missing RUN_DIR");
    if (!args.count("out")) throw cxxopts::exceptions::exception("missing --out FILE");
    std::vector<metrics::RunRows> runs;
    for (const auto& dir : args["runs"].as<std::vector<std::string>>())
      for (auto& run : metrics::load_runs(dir)) runs.push_back(std::move(run));
    const std::string out = args["out"].as<std::string>();
    const auto folder = std::filesystem::path(out).parent_path();
    std::error_code ec;
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    std::ofstream file(out, std::ios::trunc);
    file << metrics::render_report(runs, args["title"].as<std::string>());
    file.close();
    if (!file) throw metrics::RunError("cannot write " + out);
    std::cout << metrics::summary_text(metrics::summarize(runs)) << "wrote " << out << "\n";
    return 0;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "diloco: error: " << e.what() << " (see diloco report --help)\n";
  } catch (const metrics::RunError& e) {
    std::cerr << "diloco: error: " << e.what() << "\n";
  }
  return kBadInput;
}

}  // namespace diloco::app
