// Emulated wide-area links between sites, applied inside a communicator so that
// every measured time (probe, exchange, metrics) really reflects them. Each
// site has its own access link, an uplink and a downlink of its bandwidth
// (each way, as scripts/netsim shapes a namespace): a message between two
// sites takes the larger latency of the two, and the messages a collective
// moves at once share each site's uplink and downlink as TCP flows share a
// bottleneck (max-min fair), so an all-gather's n - 1 copies of a payload
// queue on the sender's uplink as they do on a real link.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/communicator.h"

namespace diloco::comm {

struct SiteLink {
  double latency_ms = 0.0;
  double bandwidth_mbps = 0.0;  // each way: the uplink's and the downlink's; 0: unlimited
};

// From `round` on, `site`'s link becomes `link` (a degradation or recovery).
struct LinkChange {
  int round = 0;
  int site = 0;
  SiteLink link;
};

// `bytes` from site `from` to site `to`, moving at the same time as the
// other flows of one collective.
struct Flow {
  int from = 0;
  int to = 0;
  double bytes = 0.0;
};

class LinkEmulator {
 public:
  LinkEmulator(std::vector<SiteLink> sites, std::vector<LinkChange> schedule);

  // Applies the schedule's changes for rounds <= `round`.
  void set_round(int round);

  // Seconds to move `bytes` from site a to site b (alone on both links).
  double transfer_seconds(int a, int b, std::size_t bytes) const;
  // Seconds until the last of `flows`, started together, has arrived: each
  // flow's pair latency after its last byte has gone, with each site's
  // uplink shared by what it sends and its downlink by what it receives,
  // max-min fair (progressive filling, shared anew as flows end).
  double flows_seconds(const std::vector<Flow>& flows) const;
  SiteLink link(int site) const;
  int sites() const { return static_cast<int>(initial_.size()); }

 private:
  // The round loop changes links while an overlapped exchange reads them.
  mutable std::mutex mutex_;
  std::vector<SiteLink> initial_;
  std::vector<SiteLink> current_;
  std::vector<LinkChange> schedule_;
};

// Wraps the site leaders' communicator: each message is held back for its
// emulated transfer time, before the real transfer (send), or until that
// time has passed since the call began (collectives: the real transfer
// overlaps the emulated flight). A rank is its site (one mpirun), unless
// `site_of` says which site a rank is now (sites launched apart: the
// membership's order, which changes as sites leave and join).
class EmulatedCommunicator final : public Communicator {
 public:
  using SiteOf = std::function<int(int rank)>;
  EmulatedCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<LinkEmulator> links,
                       SiteOf site_of = nullptr);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(std::span<float> data) override;
  void all_reduce_sum(std::span<double> data) override;
  std::unique_ptr<Work> all_reduce_sum_async(std::span<float> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override;
  std::vector<std::byte> send_recv(std::span<const std::byte> data, int dest, int source, int tag) override;
  void send(std::span<const std::byte> data, int dest, int tag) override;
  void recv(std::span<std::byte> data, int source, int tag) override;
  void barrier() override;
  void wait_for_all() override { inner_->wait_for_all(); }
  void set_watchdog(Watchdog* watchdog) override;

  LinkEmulator& links() { return *links_; }

 protected:
  std::unique_ptr<Communicator> make_duplicate() override;

 private:
  void sync_traffic();
  // A ring all-reduce of `bytes`: 2 (n - 1) steps of every site sending a
  // 1/n chunk to the next.
  double ring_seconds(std::size_t bytes) const;
  // The site of `rank` (throws when the links do not describe it).
  int site(int rank) const;

  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<LinkEmulator> links_;
  SiteOf site_of_;
};

}  // namespace diloco::comm
