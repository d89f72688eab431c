// The metrics rows of finished or running runs, found from their folders:
// RUN_DIR/metrics.jsonl, or for sites launched apart (each its own output
// folder under one run folder) RUN_DIR/SITE/metrics.jsonl for every site.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace diloco::metrics {

// A folder or file that is missing or not metrics JSON lines; the message
// names it (and the line).
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunRows {
  std::string name;  // the folder's name, "RUN/SITE" for a site of a run launched apart
  std::string dir;   // the folder holding metrics.jsonl
  std::vector<nlohmann::ordered_json> rows;
};

// Every run in `run_dir`; a last line still being written (no newline yet)
// is left out, any other malformed line throws RunError.
std::vector<RunRows> load_runs(const std::string& run_dir);

}  // namespace diloco::metrics
