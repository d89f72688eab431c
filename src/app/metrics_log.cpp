// JSON lines; numbers printed with enough digits to round-trip.
#include "app/metrics_log.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace diloco::app {
namespace {

// Appends "name":value pairs to one JSON object.
class JsonObject {
 public:
  JsonObject() { out_ << "{"; }
  JsonObject& number(const char* name, double v) {
    key(name);
    put(v);
    return *this;
  }
  JsonObject& integer(const char* name, long long v) {
    key(name);
    out_ << v;
    return *this;
  }
  JsonObject& optional(const char* name, const std::optional<double>& v) {
    key(name);
    if (v) put(*v); else out_ << "null";
    return *this;
  }
  // A list of numbers: integers as they are, floating point as put() writes it.
  template <class T>
  JsonObject& list(const char* name, const std::vector<T>& values) {
    key(name);
    out_ << "[";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i) out_ << ",";
      if constexpr (std::is_floating_point_v<T>) put(values[i]);
      else out_ << values[i];
    }
    out_ << "]";
    return *this;
  }
  // A value already written as JSON.
  JsonObject& raw(const char* name, const std::string& json) {
    key(name);
    out_ << json;
    return *this;
  }
  std::string done() {
    out_ << "}";
    return out_.str();
  }

 private:
  void key(const char* name) {
    out_ << (first_ ? "" : ",") << "\"" << name << "\":";
    first_ = false;
  }
  void put(double v) {
    if (std::isfinite(v)) out_ << std::setprecision(9) << v;
    else out_ << "null";  // JSON has no NaN or infinity
  }
  std::ostringstream out_;
  bool first_ = true;
};

double to_mbps(double bytes_per_s) { return bytes_per_s * 8.0 / 1e6; }

std::string excluded_json(const std::vector<outer::ExcludedSite>& excluded) {
  std::string out = "[";
  for (std::size_t i = 0; i < excluded.size(); ++i)
    out += std::string(i ? "," : "") + JsonObject()
                                .integer("site", excluded[i].site)
                                .raw("reason", std::string("\"") + outer::to_string(excluded[i].reason) + "\"")
                                .done();
  return out + "]";
}

// Names as a JSON array of strings (site names are the recipe's: quoted,
// with quotes and backslashes escaped).
std::string names_json(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += i ? ",\"" : "\"";
    for (char c : names[i]) {
      if (c == '"' || c == '\\') out += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) out += c;
    }
    out += "\"";
  }
  return out + "]";
}

std::string membership_json(const std::vector<comm::MembershipChange>& changes) {
  std::string out = "[";
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const auto& c = changes[i];
    out += std::string(i ? "," : "") + JsonObject()
                                           .integer("epoch", c.epoch)
                                           .raw("left", names_json(c.left))
                                           .raw("joined", names_json(c.joined))
                                           .raw("refused", names_json(c.refused))
                                           .raw("why", names_json({c.why}).substr(1, names_json({c.why}).size() - 2))
                                           .number("seconds", c.seconds)
                                           .done();
  }
  return out + "]";
}

}  // namespace

std::string link_pairs_json(const std::vector<std::vector<comm::LinkEstimate>>& m) {
  std::string out = "[";
  for (std::size_t a = 0; a < m.size(); ++a)
    for (std::size_t b = a + 1; b < m.size(); ++b)
      out += std::string(out.size() > 1 ? "," : "") + JsonObject()
                                               .integer("a", static_cast<long long>(a))
                                               .integer("b", static_cast<long long>(b))
                                               .number("latency_ms", m[a][b].latency_s * 1000.0)
                                               .number("bandwidth_mbps", to_mbps(m[a][b].bandwidth_bytes_per_s))
                                               .done();
  return out + "]";
}

MetricsLog::MetricsLog(const std::string& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc), path_(path) {
  if (!out_) throw std::runtime_error("cannot write metrics to " + path);
}

std::string MetricsLog::to_json(const outer::RoundMetrics& m) {
  JsonObject o;
  o.integer("round", m.round)
      .integer("H", m.H)
      .number("train_loss", m.train_loss)
      .optional("eval_loss", m.eval_loss)
      .integer("tokens", m.tokens)
      .integer("bytes_sent", static_cast<long long>(m.bytes_sent))
      .number("wall_s", m.wall_s)
      .number("compute_s", m.compute_s)
      .number("comm_s", m.comm_s)
      .number("exposed_comm_s", m.exposed_comm_s)
      .number("wait_s", m.wait_s)
      .number("comm_share", m.comm_share)
      .number("utilization", m.utilization)
      .integer("peak_exchange_bytes", static_cast<long long>(m.peak_exchange_bytes))
      .number("predicted_comm_share", m.predicted_comm_share)
      .number("step_s", m.step_s)
      .number("sync_s", m.sync_s)
      .integer("next_H", m.next_H)
      .list("site_steps", m.site_steps)
      .list("site_step_s", m.site_step_s)
      .list("next_site_H", m.next_site_H)
      .optional("link_latency_ms", m.link ? std::optional<double>(m.link->latency_s * 1000.0) : std::nullopt)
      .optional("link_bandwidth_mbps",
                m.link && m.link->bandwidth_bytes_per_s > 0.0 ? std::optional<double>(to_mbps(m.link->bandwidth_bytes_per_s))
                                                              : std::nullopt);
  if (!m.probed.empty()) o.raw("probed", link_pairs_json(m.probed));
  if (m.members > 0) o.integer("epoch", m.epoch).integer("members", m.members).raw("membership", membership_json(m.membership));
  return o.raw("excluded", excluded_json(m.excluded)).integer("excluded_total", m.excluded_total).done();
}

void MetricsLog::write(const outer::RoundMetrics& m) {
  out_ << to_json(m) << "\n";
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write metrics to " + path_);
}

}  // namespace diloco::app
