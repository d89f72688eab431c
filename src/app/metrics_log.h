// Writes one JSON object per outer round to OUT/metrics.jsonl (rank 0 only).
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "outer/trainer.h"

namespace diloco::app {

// A link matrix as a JSON list of pairs {a, b, latency_ms, bandwidth_mbps}
// (a < b), as `diloco probe` and the metrics rows of re-probed rounds hold it.
nlohmann::ordered_json link_pairs_json(const std::vector<std::vector<comm::LinkEstimate>>& matrix);

class MetricsLog {
 public:
  // Truncates `path` (or appends to it, on a resume); throws
  // std::runtime_error if it cannot be opened.
  explicit MetricsLog(const std::string& path, bool append = false);
  void write(const outer::RoundMetrics& m);

  static std::string to_json(const outer::RoundMetrics& m);

 private:
  std::ofstream out_;
  std::string path_;
};

}  // namespace diloco::app
