#include "outer/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "comm/comm_error.h"
#include "outer/clock.h"

namespace diloco::outer {

DataParallelSync::DataParallelSync(comm::SiteComms& comms, Exchange* exchange) : comms_(comms), exchange_(exchange) {
  if (comms_.topology.is_leader() && !exchange_)
    throw std::invalid_argument("a site leader needs an exchange for data-parallel sync");
  const auto& t = comms_.topology;
  for (int size : t.site_sizes) shares_.push_back(static_cast<float>(size) / static_cast<float>(t.world_size));
}

void DataParallelSync::sync(std::span<float> grads, std::int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  if (comms_.topology.is_leader() && recovery_) totals_.exchanges.push_back(exchange_apart(grads, step));
  else if (comms_.topology.is_leader() && comms_.topology.num_sites > 1)
    totals_.exchanges.push_back(exchange_->mean(grads, shares_, step));
  if (comms_.topology.site_size > 1) {
    comms_.site->wait_for_all();  // the other ranks sleep through their leader's exchange
    comm::broadcast_values(*comms_.site, grads, 0);
  }
  totals_.seconds += seconds_since(start);
}

// Between sites launched apart: the step's exchange over the present
// members, redone from this site's own gradients (and residual) over the
// survivors after a loss, unless a survivor applied it already: then this
// site takes that average (docs/membership.md, "Data parallelism").
ExchangeStats DataParallelSync::exchange_apart(std::span<float> grads, std::int64_t step) {
  own_.assign(grads.begin(), grads.end());
  const auto residual = exchange_->residual();
  residual_.assign(residual.begin(), residual.end());
  for (;;) {
    auto shares = recovery_->shares();
    if (shares.empty()) return {};  // out of the group: the round ends on this site's own steps
    try {
      auto stats = exchange_->mean(grads, shares, step);
      recovery_->applied(grads);
      return stats;
    } catch (const comm::PeerLost& lost) {
      std::copy(own_.begin(), own_.end(), grads.begin());
      exchange_->set_residual(residual_);
      if (recovery_->recover(lost.what(), grads)) return {};
    }
  }
}

DataParallelSync::Totals DataParallelSync::take() { return std::exchange(totals_, {}); }

}  // namespace diloco::outer
