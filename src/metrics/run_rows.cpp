// Finding and reading metrics.jsonl files.
#include "metrics/run_rows.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace diloco::metrics {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::ordered_json> read_rows(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw RunError("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::vector<nlohmann::ordered_json> rows;
  std::size_t start = 0;
  for (int line = 1; start < all.size(); ++line) {
    const std::size_t end = all.find('\n', start);
    if (end == std::string::npos) break;  // being written
    const std::string_view body(all.data() + start, end - start);
    start = end + 1;
    if (body.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto row = nlohmann::ordered_json::parse(body, nullptr, false);
    if (row.is_discarded() || !row.is_object() || !row.contains("round"))
      throw RunError(path.string() + ":" + std::to_string(line) + ": not a metrics row (a JSON object with \"round\")");
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string base_name(const fs::path& dir) {
  const fs::path clean = dir.lexically_normal();
  const std::string name = (clean.has_filename() ? clean : clean.parent_path()).filename().string();
  return name.empty() || name == "." ? fs::absolute(dir).lexically_normal().parent_path().filename().string() : name;
}

}  // namespace

std::vector<RunRows> load_runs(const std::string& run_dir) {
  const fs::path dir(run_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw RunError(run_dir + ": no such run folder");
  if (fs::exists(dir / "metrics.jsonl")) return {{base_name(dir), run_dir, read_rows(dir / "metrics.jsonl")}};
  std::vector<RunRows> sites;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory() && fs::exists(entry.path() / "metrics.jsonl"))
      sites.push_back({base_name(dir) + "/" + entry.path().filename().string(), entry.path().string(),
                       read_rows(entry.path() / "metrics.jsonl")});
  if (sites.empty())
    throw RunError(run_dir + ": no metrics.jsonl in it, nor in a folder of each site (is it a run's run.out_dir?)");
  std::sort(sites.begin(), sites.end(), [](const RunRows& a, const RunRows& b) { return a.name < b.name; });
  return sites;
}

}  // namespace diloco::metrics
