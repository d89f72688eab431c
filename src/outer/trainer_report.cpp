// What a round reports: the leaders' gather of each site's figures (loss,
// tokens, bytes, step and sync times), from which every leader plans the same
// H and the passive link estimate; the occasional active re-probe.
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "diloco/compression/crc32c.h"
#include "outer/clock.h"
#include "outer/trainer.h"

namespace diloco::outer {

void Trainer::RoundSync::add(const ExchangeStats& s) {
  exchange_s += s.seconds;
  agree_s = agree_s > 0.0 ? std::min(agree_s, s.agree_seconds) : s.agree_seconds;
  peak_bytes = std::max(peak_bytes, s.payload_bytes);
  excluded.insert(excluded.end(), s.excluded.begin(), s.excluded.end());
  // Timing parts add up over the round's exchanges; the report plans from them.
  const ExchangeStats before = last;
  last = s;
  last.seconds += before.seconds;
  last.agree_seconds += before.agree_seconds;
  last.transfer_seconds += before.transfer_seconds;
  last.transfer_messages += before.transfer_messages;
  last.critical_bytes += before.critical_bytes;
}

// Leaders share what rank 0 reports (loss, tokens, bytes sent so far) and
// what the schedule plans from (step and sync times); every leader sees the
// same reports, so every leader plans the same H.
void Trainer::report(const inner::InnerStats& stats, const RoundSync& sync, RoundMetrics& metrics) {
  const ExchangeStats& exchanged = sync.last;
  metrics.excluded = sync.excluded;
  metrics.excluded_total += static_cast<std::int64_t>(sync.excluded.size());
  metrics.peak_exchange_bytes = sync.peak_bytes;

  comm::Communicator& leaders = *comms_.leaders;
  const bool excluded = std::any_of(metrics.excluded.begin(), metrics.excluded.end(),
                                    [&](const ExcludedSite& e) { return e.site == leaders.rank(); });
  // The comm thread's counter is not read while it may be counting; its
  // exchanges are added up as they finish instead.
  const auto sent_so_far = leaders.traffic().bytes_sent + exchanged_bytes_;
  SiteReport mine{excluded ? 0.0 : stats.mean_loss,
                  excluded ? 0.0 : static_cast<double>(stats.tokens),
                  static_cast<double>(sent_so_far),
                  stats.steps > 0 ? stats.seconds / stats.steps : 0.0,
                  sync.exchange_s,
                  last_report_s_,
                  sync.agree_s,
                  static_cast<double>(stats.steps),
                  exchanged.transfer_seconds,
                  static_cast<double>(exchanged.transfer_messages),
                  static_cast<double>(exchanged.critical_bytes),
                  static_cast<double>(metrics.round),
                  checked_round(metrics.round) ? params_hash() : -1.0,
                  busy_s_,
                  membership_ && leaders.rank() == 0 && !admitting_now_
                      ? static_cast<double>(membership_->knocks_waiting())
                      : 0.0};
  const auto before_report = leaders.traffic().bytes_sent;
  const auto report_start = std::chrono::steady_clock::now();
  std::vector<std::byte> sealed(sizeof(SiteReport));
  std::memcpy(sealed.data(), &mine, sizeof(SiteReport));
  seal(sealed, sealing_context("report", metrics.round, leaders.rank()));
  auto reports = leaders.all_gather(sealed);
  for (std::size_t i = 0; i < reports.size(); ++i)
    if (!unseal(reports[i], sealing_context("report", metrics.round, static_cast<int>(i))))
      throw comm::CommError("site rank " + std::to_string(i) + "'s report of round " + std::to_string(metrics.round) +
                                " failed its key check (tampered on the way?)",
                            static_cast<int>(i));
  last_report_s_ = seconds_since(report_start);
  // Every leader sends the same-sized report, so this one's cost times the
  // number of sites completes the count (and a resumed run counts the same).
  const double report_bytes = static_cast<double>(leaders.traffic().bytes_sent - before_report) *
                              static_cast<double>(reports.size());
  double loss_weighted = 0.0;
  double tokens = 0.0;
  double bytes = 0.0;
  double slowest_step = 0.0;
  auto& site_step_s = metrics.site_step_s;
  site_step_s.clear();
  metrics.site_exchange_s.clear();
  metrics.site_steps.clear();
  double quickest_exchange = std::numeric_limits<double>::infinity();
  double quickest_report = std::numeric_limits<double>::infinity();
  double quickest_agree = std::numeric_limits<double>::infinity();
  SiteReport quickest_transfer{};
  quickest_transfer.transfer_s = std::numeric_limits<double>::infinity();
  std::vector<SiteReport> all(reports.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (reports[i].size() != sizeof(SiteReport)) throw std::runtime_error("malformed site report");
    std::memcpy(&all[i], reports[i].data(), sizeof(SiteReport));
  }
  check_reports(all, mine);
  if (membership_) {  // a recovery's alarm waits for the busiest member
    double busiest = 0.0;
    for (const auto& r : all) busiest = std::max(busiest, r.busy_s);
    membership_->set_busy_s(busiest);
    admit_next_ = all.front().knocks > 0.0;  // the door's keeper announces newcomers a round ahead
  }
  for (const auto& r : all) {
    loss_weighted += r.mean_loss * r.tokens;
    tokens += r.tokens;
    bytes += r.bytes_sent;
    slowest_step = std::max(slowest_step, r.step_s);
    site_step_s.push_back(r.step_s);
    metrics.site_exchange_s.push_back(r.exchange_s);
    metrics.site_steps.push_back(static_cast<int>(r.steps));
    // The last site to arrive waits for nobody: its time is the sync itself.
    quickest_exchange = std::min(quickest_exchange, r.exchange_s);
    // This gather's own cost is only known afterwards; the last round's stands in.
    quickest_report = std::min(quickest_report, r.report_s);
    quickest_agree = std::min(quickest_agree, r.agree_s);
    if (r.transfer_s < quickest_transfer.transfer_s) quickest_transfer = r;  // waited least on others
  }
  metrics.step_s = slowest_step;
  metrics.sync_s = quickest_exchange + quickest_report;
  // Sites launched apart: the first report of a membership epoch starts the
  // per-site history over on every member alike (ranks changed meaning).
  const bool group_changed = membership_ && membership_->epoch() != planned_epoch_;
  if (group_changed) {
    scheduler_.forget_sites();
    planned_epoch_ = membership_->epoch();
  }
  scheduler_.observe(site_step_s, metrics.sync_s);
  const Plan plan = scheduler_.advance();
  H_ = scheduler_.site_H(plan_index());
  metrics.next_site_H = plan.site_H;
  // Tiny gathers: the last leader to arrive waits for nobody, so the
  // quickest leader's time is one message's latency (plus noise the tracker
  // filters out).
  link_tracker_.observe_latency(quickest_agree);
  link_tracker_.observe_latency(quickest_report);
  link_tracker_.observe_transfer(static_cast<std::size_t>(quickest_transfer.critical_bytes),
                                 static_cast<int>(quickest_transfer.transfer_messages), quickest_transfer.transfer_s);
  if (link_tracker_.known()) metrics.link = link_tracker_.estimate();
  metrics.train_loss = tokens > 0 ? loss_weighted / tokens : 0.0;
  metrics.tokens += static_cast<std::int64_t>(tokens);
  metrics.bytes_sent = restored_.bytes_sent + static_cast<std::uint64_t>(bytes + report_bytes);
  reprobe(metrics, group_changed);
}

int Trainer::plan_index() const { return membership_ ? comms_.leaders->rank() : comms_.topology.site; }

bool Trainer::checked_round(int round) const { return sync_.check_every > 0 && round % sync_.check_every == 0; }

// CRC-32C of the global params' bytes, then of the outer optimizer's
// state: equal on every leader unless the replicas diverged (a site that
// left out another sender, a fault in a codec or a transport, a site that
// rejoined or redid a round with another outer momentum).
double Trainer::params_hash() const {
  std::uint32_t crc = compression::crc32c(std::as_bytes(std::span<const float>(global_)));
  for (const auto& f : syncs_) crc = compression::crc32c(std::as_bytes(f.outer->state()), crc);
  return static_cast<double>(crc);
}

// Every leader reports the same round, and in checked rounds the same
// global params; otherwise the run stops (exit 3) naming the sites.
void Trainer::check_reports(const std::vector<SiteReport>& all, const SiteReport& mine) const {
  std::string wrong_round, differ;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].round != mine.round)
      wrong_round += (wrong_round.empty() ? "" : ", ") + leader_name(static_cast<int>(i)) + " (round " +
                     std::to_string(static_cast<long long>(all[i].round)) + ")";
    if (mine.params_hash >= 0.0 && all[i].params_hash != mine.params_hash)
      differ += (differ.empty() ? "" : ", ") + leader_name(static_cast<int>(i));
  }
  if (!wrong_round.empty())
    throw comm::CommError("the sites' reports are of different rounds: this site (" +
                              leader_name(comms_.leaders->rank()) + ") is in round " +
                              std::to_string(static_cast<long long>(mine.round)) + ", " + wrong_round,
                          -1);
  if (!differ.empty())
    throw comm::CommError("the global params or outer state diverged in round " +
                              std::to_string(static_cast<long long>(mine.round)) +
                              ": " + differ + " differ from this site (" + leader_name(comms_.leaders->rank()) +
                              "); stopping (sync.check_every)",
                          -1);
}

// A leader by its rank among the leaders: its site's name.
std::string Trainer::leader_name(int rank) const {
  if (membership_ && rank < static_cast<int>(membership_->members().size()))
    return membership_->members()[static_cast<std::size_t>(rank)].name;
  return "site " + std::to_string(rank);
}

// Every sync.reprobe_every rounds, and (sites launched apart) in the first
// report of each membership epoch, the leaders measure every pair actively;
// the passive estimate restarts from the slowest pair.
void Trainer::reprobe(RoundMetrics& metrics, bool group_changed) {
  metrics.probed.clear();
  if (sync_.reprobe_every <= 0 || comms_.leaders->size() < 2) return;
  if (metrics.round % sync_.reprobe_every != 0 && !group_changed) return;
  // Its bytes count in the next round's total (the traffic counters are cumulative).
  metrics.probed = comm::probe_links(*comms_.leaders);
  link_tracker_.seed(bottleneck(metrics.probed));
  metrics.link = link_tracker_.estimate();
}

// The leader tells its site the H it planned for the next round.
void Trainer::share_next_H(RoundMetrics& metrics) {
  std::int64_t h = H_;
  comm::broadcast_values(*comms_.site, std::span<std::int64_t>(&h, 1), 0);
  H_ = static_cast<int>(h);
  metrics.next_H = H_;
}

std::string Trainer::sealing_context(const char* kind, std::int64_t round, int sender) const {
  return outer::sealing_context(kind, membership_ ? membership_->epoch() : 0, round, sender);
}

void Trainer::seal(std::vector<std::byte>& bytes, const std::string& context) const {
  if (auth_) auth_->seal(context, bytes);
}

bool Trainer::unseal(std::vector<std::byte>& bytes, const std::string& context) const {
  return !auth_ || auth_->unseal(context, bytes);
}

}  // namespace diloco::outer
