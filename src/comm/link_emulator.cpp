// Link emulation by holding messages back for their modelled transfer time.
#include "comm/link_emulator.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <thread>

namespace diloco::comm {
namespace {

using Clock = std::chrono::steady_clock;

void hold(double seconds) {
  if (seconds > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// A collective's data is in flight over the emulated link while the real
// transfer runs: the end hosts' copying, and a peer that is slow to answer
// (descheduled on a busy machine), overlap the link's time instead of adding
// to it. Holding the whole link time after the real transfer had made every
// emulated message slower than its link by whatever the machine was doing
// (4-8 ms on a 10 ms link, measured on a loaded 2-core machine).
void hold_rest(Clock::time_point start, double seconds) {
  hold(seconds - std::chrono::duration<double>(Clock::now() - start).count());
}

// Max-min fair rates of the flows with bytes `left`, each crossing the two
// resources `uses` names (of `capacity` bytes/s, 0 unlimited), by
// progressive filling: the resource whose equal share is smallest fixes its
// flows at that share, and again with what is left. -1: a flow that crosses
// unlimited resources only.
std::vector<double> fair_rates(const std::vector<double>& capacity, const std::vector<std::array<std::size_t, 2>>& uses,
                               const std::vector<double>& left) {
  const std::size_t resources = capacity.size();
  std::vector<double> rate(left.size(), -1.0);
  std::vector<double> room = capacity;
  for (;;) {
    std::vector<int> unfixed(resources, 0);
    for (std::size_t f = 0; f < left.size(); ++f)
      if (left[f] > 0.0 && rate[f] < 0.0)
        for (std::size_t r : uses[f]) ++unfixed[r];
    std::size_t tightest = resources;
    for (std::size_t r = 0; r < resources; ++r)
      if (unfixed[r] > 0 && capacity[r] > 0.0 &&
          (tightest == resources || room[r] / unfixed[r] < room[tightest] / unfixed[tightest]))
        tightest = r;
    if (tightest == resources) return rate;
    const double share = std::max(0.0, room[tightest] / unfixed[tightest]);
    for (std::size_t f = 0; f < left.size(); ++f)
      if (left[f] > 0.0 && rate[f] < 0.0 && (uses[f][0] == tightest || uses[f][1] == tightest)) {
        rate[f] = share;
        for (std::size_t r : uses[f]) room[r] -= share;
      }
  }
}

}  // namespace

LinkEmulator::LinkEmulator(std::vector<SiteLink> sites, std::vector<LinkChange> schedule)
    : initial_(std::move(sites)), current_(initial_), schedule_(std::move(schedule)) {
  for (const auto& c : schedule_)
    if (c.site < 0 || c.site >= static_cast<int>(initial_.size()))
      throw std::invalid_argument("link change for site " + std::to_string(c.site) + " of " +
                                  std::to_string(initial_.size()));
  std::stable_sort(schedule_.begin(), schedule_.end(), [](const auto& a, const auto& b) { return a.round < b.round; });
}

void LinkEmulator::set_round(int round) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = initial_;
  for (const auto& c : schedule_)
    if (c.round <= round) current_[static_cast<std::size_t>(c.site)] = c.link;
}

SiteLink LinkEmulator::link(int site) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_.at(static_cast<std::size_t>(site));
}

double LinkEmulator::transfer_seconds(int a, int b, std::size_t bytes) const {
  return flows_seconds({{a, b, static_cast<double>(bytes)}});
}

double LinkEmulator::flows_seconds(const std::vector<Flow>& flows) const {
  std::vector<SiteLink> links;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    links = current_;
  }
  const std::size_t n = links.size();
  // Resources: site s's uplink is s, its downlink n + s; bytes per second,
  // 0 for unlimited.
  std::vector<double> capacity(2 * n);
  for (std::size_t s = 0; s < n; ++s) capacity[s] = capacity[n + s] = links[s].bandwidth_mbps * 1e6 / 8.0;
  std::vector<double> latency, left;
  std::vector<std::array<std::size_t, 2>> uses;
  for (const auto& f : flows) {
    if (f.from < 0 || f.to < 0 || static_cast<std::size_t>(f.from) >= n || static_cast<std::size_t>(f.to) >= n)
      throw std::invalid_argument("flow between sites " + std::to_string(f.from) + " and " + std::to_string(f.to) +
                                  " of " + std::to_string(n));
    latency.push_back(std::max(links[f.from].latency_ms, links[f.to].latency_ms) / 1000.0);
    left.push_back(f.bytes);
    uses.push_back({static_cast<std::size_t>(f.from), n + static_cast<std::size_t>(f.to)});
  }
  double elapsed = 0.0, last = 0.0;  // the latest arrival: a flow's latency after its last byte left
  for (;;) {
    const auto rate = fair_rates(capacity, uses, left);
    // Until the first flow ends; flows on unlimited links end at once.
    double step = -1.0;
    for (std::size_t f = 0; f < left.size(); ++f)
      if (left[f] > 0.0) {
        const double t = rate[f] < 0.0 ? 0.0 : (rate[f] > 0.0 ? left[f] / rate[f] : -1.0);
        if (t >= 0.0 && (step < 0.0 || t < step)) step = t;
      }
    if (step < 0.0) break;  // nothing left to move
    elapsed += step;
    for (std::size_t f = 0; f < left.size(); ++f) {
      if (left[f] <= 0.0) continue;
      left[f] = rate[f] < 0.0 ? 0.0 : left[f] - rate[f] * step;
      if (left[f] < 1e-6) {
        left[f] = 0.0;
        last = std::max(last, latency[f] + elapsed);
      }
    }
  }
  for (std::size_t f = 0; f < flows.size(); ++f)
    if (flows[f].bytes <= 0.0) last = std::max(last, latency[f]);
  return last;
}

EmulatedCommunicator::EmulatedCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<LinkEmulator> links,
                                           SiteOf site_of)
    : inner_(std::move(inner)), links_(std::move(links)), site_of_(std::move(site_of)) {
  if (!site_of_ && links_->sites() != inner_->size())
    throw std::invalid_argument("link emulation describes " + std::to_string(links_->sites()) + " sites; there are " +
                                std::to_string(inner_->size()));
}

int EmulatedCommunicator::site(int rank) const {
  const int s = site_of_ ? site_of_(rank) : rank;
  if (s < 0 || s >= links_->sites())
    throw std::invalid_argument("link emulation describes " + std::to_string(links_->sites()) +
                                " sites; rank " + std::to_string(rank) + " is site " + std::to_string(s));
  return s;
}

// The duplicate shares the links: both directions of use see the same
// schedule of changes.
std::unique_ptr<Communicator> EmulatedCommunicator::make_duplicate() {
  return std::make_unique<EmulatedCommunicator>(inner_->duplicate(), links_, site_of_);
}

// The real waits happen in the wrapped communicator: it must be timed too.
void EmulatedCommunicator::set_watchdog(Watchdog* watchdog) {
  watchdog_ = watchdog;
  inner_->set_watchdog(watchdog);
}

void EmulatedCommunicator::sync_traffic() { traffic_ = inner_->traffic(); }

double EmulatedCommunicator::ring_seconds(std::size_t bytes) const {
  const int n = size();
  if (n < 2) return 0.0;
  std::vector<Flow> step;
  for (int r = 0; r < n; ++r) step.push_back({site(r), site((r + 1) % n), static_cast<double>(bytes / n)});
  return 2.0 * (n - 1) * links_->flows_seconds(step);
}

void EmulatedCommunicator::all_reduce_sum(std::span<float> data) {
  const auto start = Clock::now();
  inner_->all_reduce_sum(data);
  hold_rest(start, ring_seconds(data.size_bytes()));
  sync_traffic();
}

void EmulatedCommunicator::all_reduce_sum(std::span<double> data) {
  const auto start = Clock::now();
  inner_->all_reduce_sum(data);
  hold_rest(start, ring_seconds(data.size_bytes()));
  sync_traffic();
}

std::unique_ptr<Work> EmulatedCommunicator::all_reduce_sum_async(std::span<float> data) {
  // Held back up front; the handle then completes as the real one does.
  hold(ring_seconds(data.size_bytes()));
  auto work = inner_->all_reduce_sum_async(data);
  sync_traffic();
  return work;
}

void EmulatedCommunicator::broadcast(std::span<std::byte> data, int root) {
  const auto start = Clock::now();
  inner_->broadcast(data, root);
  std::vector<Flow> flows;
  for (int r = 0; r < size(); ++r)
    if (r != root) flows.push_back({site(root), site(r), static_cast<double>(data.size())});
  hold_rest(start, links_->flows_seconds(flows));
  sync_traffic();
}

std::vector<std::vector<std::byte>> EmulatedCommunicator::all_gather(std::span<const std::byte> mine) {
  const auto start = Clock::now();
  auto all = inner_->all_gather(mine);
  // Every site sends its buffer to every other at once, n - 1 copies over
  // its uplink; all sites know every size now, so each completes the
  // flows' time counted from when it entered (the last site to arrive: from
  // when the data could first have left).
  std::vector<Flow> flows;
  for (int from = 0; from < size(); ++from)
    for (int to = 0; to < size(); ++to)
      if (from != to) flows.push_back({site(from), site(to), static_cast<double>(all[from].size())});
  hold_rest(start, links_->flows_seconds(flows));
  sync_traffic();
  return all;
}

std::vector<std::byte> EmulatedCommunicator::send_recv(std::span<const std::byte> data, int dest, int source, int tag) {
  hold(links_->transfer_seconds(site(rank()), site(dest), data.size()));
  auto in = inner_->send_recv(data, dest, source, tag);
  sync_traffic();
  return in;
}

void EmulatedCommunicator::send(std::span<const std::byte> data, int dest, int tag) {
  hold(links_->transfer_seconds(site(rank()), site(dest), data.size()));
  inner_->send(data, dest, tag);
  sync_traffic();
}

void EmulatedCommunicator::recv(std::span<std::byte> data, int source, int tag) {
  inner_->recv(data, source, tag);
  sync_traffic();
}

void EmulatedCommunicator::barrier() {
  const auto start = Clock::now();
  inner_->barrier();
  double slowest = 0.0;
  for (int r = 1; r < size(); ++r) slowest = std::max(slowest, links_->transfer_seconds(site(0), site(r), 0));
  hold_rest(start, 2.0 * slowest);
}

}  // namespace diloco::comm
