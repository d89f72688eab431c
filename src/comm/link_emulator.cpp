// Link emulation by holding messages back for their modelled transfer time.
#include "comm/link_emulator.h"

#include <algorithm>
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
  const SiteLink x = link(a);
  const SiteLink y = link(b);
  const double latency = std::max(x.latency_ms, y.latency_ms) / 1000.0;
  double bandwidth = 0.0;  // bytes per second; 0 = unlimited
  for (double mbps : {x.bandwidth_mbps, y.bandwidth_mbps})
    if (mbps > 0.0) bandwidth = bandwidth == 0.0 ? mbps * 1e6 / 8.0 : std::min(bandwidth, mbps * 1e6 / 8.0);
  return latency + (bandwidth > 0.0 ? static_cast<double>(bytes) / bandwidth : 0.0);
}

EmulatedCommunicator::EmulatedCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<LinkEmulator> links)
    : inner_(std::move(inner)), links_(std::move(links)) {
  if (links_->sites() != inner_->size())
    throw std::invalid_argument("link emulation describes " + std::to_string(links_->sites()) + " sites; there are " +
                                std::to_string(inner_->size()));
}

// The duplicate shares the links: both directions of use see the same
// schedule of changes.
std::unique_ptr<Communicator> EmulatedCommunicator::make_duplicate() {
  return std::make_unique<EmulatedCommunicator>(inner_->duplicate(), links_);
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
  double slowest = 0.0;
  for (int r = 0; r < n; ++r) slowest = std::max(slowest, links_->transfer_seconds(r, (r + 1) % n, bytes / n));
  return 2.0 * (n - 1) * slowest;
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
  double slowest = 0.0;
  for (int r = 0; r < size(); ++r)
    if (r != root) slowest = std::max(slowest, links_->transfer_seconds(root, r, data.size()));
  hold_rest(start, slowest);
  sync_traffic();
}

std::vector<std::vector<std::byte>> EmulatedCommunicator::all_gather(std::span<const std::byte> mine) {
  const auto start = Clock::now();
  auto all = inner_->all_gather(mine);
  // Every site sends its buffer to every other at once; all sites know every
  // size now, so each completes its link time counted from when it entered
  // (the last site to arrive: from when the data could first have left).
  double slowest = 0.0;
  for (int from = 0; from < size(); ++from)
    for (int to = 0; to < size(); ++to)
      if (from != to) slowest = std::max(slowest, links_->transfer_seconds(from, to, all[from].size()));
  hold_rest(start, slowest);
  sync_traffic();
  return all;
}

std::vector<std::byte> EmulatedCommunicator::send_recv(std::span<const std::byte> data, int dest, int source, int tag) {
  hold(links_->transfer_seconds(rank(), dest, data.size()));
  auto in = inner_->send_recv(data, dest, source, tag);
  sync_traffic();
  return in;
}

void EmulatedCommunicator::send(std::span<const std::byte> data, int dest, int tag) {
  hold(links_->transfer_seconds(rank(), dest, data.size()));
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
  for (int r = 1; r < size(); ++r) slowest = std::max(slowest, links_->transfer_seconds(0, r, 0));
  hold_rest(start, 2.0 * slowest);
}

}  // namespace diloco::comm
