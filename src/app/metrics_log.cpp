// JSON lines through nlohmann-json (ordered objects: fields stay in the order
// written; doubles round-trip; NaN and infinity become null).
#include "app/metrics_log.h"

#include <stdexcept>

namespace diloco::app {
namespace {

using Json = nlohmann::ordered_json;

double to_mbps(double bytes_per_s) { return bytes_per_s * 8.0 / 1e6; }

Json optional(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json excluded_json(const std::vector<outer::ExcludedSite>& excluded) {
  Json out = Json::array();
  for (const auto& e : excluded) out.push_back({{"site", e.site}, {"reason", outer::to_string(e.reason)}});
  return out;
}

Json membership_json(const std::vector<comm::MembershipChange>& changes) {
  Json out = Json::array();
  for (const auto& c : changes)
    out.push_back({{"epoch", c.epoch},
                   {"left", c.left},
                   {"joined", c.joined},
                   {"refused", c.refused},
                   {"why", c.why},
                   {"seconds", c.seconds},
                   {"behind", c.behind}});
  return out;
}

}  // namespace

nlohmann::ordered_json link_pairs_json(const std::vector<std::vector<comm::LinkEstimate>>& m) {
  Json out = Json::array();
  for (std::size_t a = 0; a < m.size(); ++a)
    for (std::size_t b = a + 1; b < m.size(); ++b)
      out.push_back({{"a", a},
                     {"b", b},
                     {"latency_ms", m[a][b].latency_s * 1000.0},
                     {"bandwidth_mbps", to_mbps(m[a][b].bandwidth_bytes_per_s)}});
  return out;
}

metrics::Scalars round_scalars(const outer::RoundMetrics& m, const metrics::Rates& rates) {
  metrics::Scalars s{{"round/train_loss", m.train_loss},
                     {"round/tokens", static_cast<double>(m.tokens)},
                     {"round/bytes_sent", static_cast<double>(m.bytes_sent)},
                     {"round/wall_s", m.wall_s},
                     {"round/utilization", m.utilization},
                     {"round/comm_share", m.comm_share},
                     {"round/H", m.H},
                     {"round/excluded_total", static_cast<double>(m.excluded_total)}};
  if (m.eval_loss) s.emplace_back("round/eval_loss", *m.eval_loss);
  if (rates.tokens_per_s) s.emplace_back("round/tokens_per_s", *rates.tokens_per_s);
  if (rates.mfu) s.emplace_back("round/mfu", *rates.mfu);
  if (rates.eta_s) s.emplace_back("round/eta_s", *rates.eta_s);
  for (std::size_t i = 0; i < m.site_steps.size(); ++i) {
    const std::string site = "site/site-" + std::to_string(i);
    s.emplace_back(site + "/H", m.site_steps[i]);
    if (i < m.site_step_s.size()) s.emplace_back(site + "/step_s", m.site_step_s[i]);
    if (i < m.site_exchange_s.size()) s.emplace_back(site + "/exchange_s", m.site_exchange_s[i]);
  }
  if (m.link) {
    s.emplace_back("link/latency_ms", m.link->latency_s * 1000.0);
    if (m.link->bandwidth_bytes_per_s > 0.0) s.emplace_back("link/bandwidth_mbps", to_mbps(m.link->bandwidth_bytes_per_s));
  }
  for (const auto& pair : link_pairs_json(m.probed)) {
    const std::string link = "link/site-" + pair["a"].dump() + "-site-" + pair["b"].dump();
    s.emplace_back(link + "/latency_ms", pair["latency_ms"].get<double>());
    s.emplace_back(link + "/bandwidth_mbps", pair["bandwidth_mbps"].get<double>());
  }
  if (m.members > 0) {
    s.emplace_back("membership/epoch", m.epoch);
    s.emplace_back("membership/members", m.members);
  }
  return s;
}

MetricsLog::MetricsLog(const std::string& path, bool append, const std::string& tensorboard_dir)
    : out_(path, append ? std::ios::app : std::ios::trunc), path_(path) {
  if (!out_) throw std::runtime_error("cannot write metrics to " + path);
  if (!tensorboard_dir.empty()) events_ = std::make_unique<metrics::EventWriter>(tensorboard_dir);
}

std::string MetricsLog::to_json(const outer::RoundMetrics& m, const metrics::Rates& rates) {
  Json o;
  o["round"] = m.round;
  o["H"] = m.H;
  o["train_loss"] = m.train_loss;
  o["eval_loss"] = optional(m.eval_loss);
  o["tokens"] = m.tokens;
  o["bytes_sent"] = m.bytes_sent;
  o["wall_s"] = m.wall_s;
  o["compute_s"] = m.compute_s;
  o["comm_s"] = m.comm_s;
  o["exposed_comm_s"] = m.exposed_comm_s;
  o["wait_s"] = m.wait_s;
  o["comm_share"] = m.comm_share;
  o["utilization"] = m.utilization;
  o["tokens_per_s"] = optional(rates.tokens_per_s);
  o["mfu"] = optional(rates.mfu);
  o["eta_s"] = optional(rates.eta_s);
  o["peak_exchange_bytes"] = m.peak_exchange_bytes;
  o["predicted_comm_share"] = m.predicted_comm_share;
  o["step_s"] = m.step_s;
  o["sync_s"] = m.sync_s;
  o["next_H"] = m.next_H;
  o["site_steps"] = m.site_steps;
  o["site_step_s"] = m.site_step_s;
  o["site_exchange_s"] = m.site_exchange_s;
  o["next_site_H"] = m.next_site_H;
  o["link_latency_ms"] = optional(m.link ? std::optional<double>(m.link->latency_s * 1000.0) : std::nullopt);
  o["link_bandwidth_mbps"] = optional(m.link && m.link->bandwidth_bytes_per_s > 0.0
                                          ? std::optional<double>(to_mbps(m.link->bandwidth_bytes_per_s))
                                          : std::nullopt);
  if (!m.probed.empty()) o["probed"] = link_pairs_json(m.probed);
  if (m.members > 0) {
    o["epoch"] = m.epoch;
    o["members"] = m.members;
    o["membership"] = membership_json(m.membership);
  }
  if (m.took_state)
    o["took_state"] = {{"round", m.took_state->round},
                       {"residual_before", m.took_state->residual_before},
                       {"residual_rms_before", m.took_state->residual_rms_before},
                       {"residual_after", m.took_state->residual_after}};
  o["excluded"] = excluded_json(m.excluded);
  o["excluded_total"] = m.excluded_total;
  // Invalid UTF-8 in a site name becomes U+FFFD rather than an exception.
  return o.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void MetricsLog::write(const outer::RoundMetrics& m, const metrics::Rates& rates) {
  out_ << to_json(m, rates) << "\n";
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write metrics to " + path_);
  if (events_) events_->add_scalars(m.round, round_scalars(m, rates));
}

void MetricsLog::write_step(std::int64_t step, double loss, double lr, double grad_norm) {
  if (events_) events_->add_scalars(step, {{"step/loss", loss}, {"step/lr", lr}, {"step/grad_norm", grad_norm}});
}

}  // namespace diloco::app
