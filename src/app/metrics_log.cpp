// JSON lines; numbers printed with enough digits to round-trip.
#include "app/metrics_log.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace diloco::app {
namespace {

void put_number(std::ostringstream& out, double v) {
  if (std::isfinite(v)) out << std::setprecision(9) << v;
  else out << "null";  // JSON has no NaN or infinity
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc), path_(path) {
  if (!out_) throw std::runtime_error("cannot write metrics to " + path);
}

std::string MetricsLog::to_json(const outer::RoundMetrics& m) {
  std::ostringstream out;
  out << "{\"round\":" << m.round << ",\"H\":" << m.H << ",\"train_loss\":";
  put_number(out, m.train_loss);
  out << ",\"eval_loss\":";
  if (m.eval_loss) put_number(out, *m.eval_loss); else out << "null";
  out << ",\"tokens\":" << m.tokens << ",\"bytes_sent\":" << m.bytes_sent << ",\"wall_s\":";
  put_number(out, m.wall_s);
  out << ",\"compute_s\":";
  put_number(out, m.compute_s);
  out << ",\"comm_s\":";
  put_number(out, m.comm_s);
  out << ",\"wait_s\":";
  put_number(out, m.wait_s);
  out << ",\"comm_share\":";
  put_number(out, m.comm_share);
  out << ",\"predicted_comm_share\":";
  put_number(out, m.predicted_comm_share);
  out << ",\"step_s\":";
  put_number(out, m.step_s);
  out << ",\"sync_s\":";
  put_number(out, m.sync_s);
  out << ",\"next_H\":" << m.next_H;
  out << ",\"excluded\":[";
  for (std::size_t i = 0; i < m.excluded.size(); ++i)
    out << (i ? "," : "") << "{\"site\":" << m.excluded[i].site << ",\"reason\":\"" << outer::to_string(m.excluded[i].reason)
        << "\"}";
  out << "],\"excluded_total\":" << m.excluded_total << "}";
  return out.str();
}

void MetricsLog::write(const outer::RoundMetrics& m) {
  out_ << to_json(m) << "\n";
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write metrics to " + path_);
}

}  // namespace diloco::app
