// Writes one JSON object per outer round to OUT/metrics.jsonl (rank 0 only).
#pragma once

#include <fstream>
#include <string>

#include "outer/trainer.h"

namespace diloco::app {

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
