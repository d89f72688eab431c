#include "outer/data_parallel.h"

#include <chrono>
#include <stdexcept>
#include <utility>

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
  if (comms_.topology.is_leader() && comms_.topology.num_sites > 1)
    totals_.exchanges.push_back(exchange_->mean(grads, shares_, step));
  if (comms_.topology.site_size > 1) {
    comms_.site->wait_for_all();  // the other ranks sleep through their leader's exchange
    comm::broadcast_values(*comms_.site, grads, 0);
  }
  totals_.seconds += seconds_since(start);
}

DataParallelSync::Totals DataParallelSync::take() { return std::exchange(totals_, {}); }

}  // namespace diloco::outer
