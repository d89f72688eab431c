// Writes one JSON object per outer round to OUT/metrics.jsonl (rank 0 only),
// and with metrics.tensorboard the same figures as TensorBoard scalars in
// OUT/tb, with the inner steps' loss, learning rate and gradient norm.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/event_writer.h"
#include "metrics/rate_meter.h"
#include "outer/trainer.h"

namespace diloco::app {

// A link matrix as a JSON list of pairs {a, b, latency_ms, bandwidth_mbps}
// (a < b), as `diloco probe` and the metrics rows of re-probed rounds hold it.
nlohmann::ordered_json link_pairs_json(const std::vector<std::vector<comm::LinkEstimate>>& matrix);

// A round's figures as TensorBoard scalars, tags grouped by slash
// ("round/train_loss", "site/site-1/H", "link/site-0-site-1/bandwidth_mbps").
metrics::Scalars round_scalars(const outer::RoundMetrics& m, const metrics::Rates& rates);

class MetricsLog {
 public:
  // Truncates `path` (or appends to it, on a resume); a non-empty
  // `tensorboard_dir` adds an event file there. Throws std::runtime_error
  // if either cannot be opened.
  explicit MetricsLog(const std::string& path, bool append = false, const std::string& tensorboard_dir = "");
  void write(const outer::RoundMetrics& m, const metrics::Rates& rates = {});
  // One inner step (numbered from 1 over the run) in the event file.
  void write_step(std::int64_t step, double loss, double lr, double grad_norm);

  static std::string to_json(const outer::RoundMetrics& m, const metrics::Rates& rates = {});

 private:
  std::ofstream out_;
  std::string path_;
  std::unique_ptr<metrics::EventWriter> events_;
};

}  // namespace diloco::app
