// `diloco report`: one self-contained HTML page comparing runs (summary
// table and charts; Chart.js and the page's script inlined, nothing fetched
// when it is viewed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "metrics/run_rows.h"

namespace diloco::metrics {

// One run's line of the summary table. The to-target columns are measured
// against the first run's final eval loss, as BENCHMARKS.md measures
// DiLoCo against data-parallel: the wall time and bytes at the first
// evaluation at or below it.
struct RunSummary {
  std::string name;
  int rounds = 0;
  std::optional<double> final_eval_loss;
  double final_train_loss = 0.0;
  double bytes_sent = 0.0;
  double wall_s = 0.0;
  double tokens = 0.0;
  std::optional<double> vs_first;  // final eval loss over the first run's, minus 1
  std::optional<double> to_first_s;
  std::optional<double> to_first_bytes;
};

std::vector<RunSummary> summarize(const std::vector<RunRows>& runs);

// The summary as a plain-text table (what `diloco report` prints).
std::string summary_text(const std::vector<RunSummary>& summary);

// The whole page.
std::string render_report(const std::vector<RunRows>& runs, const std::string& title);

}  // namespace diloco::metrics
