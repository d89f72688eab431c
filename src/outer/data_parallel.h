// Data parallelism across sites: every inner step's gradients are averaged
// over every rank of every site (inside a site by the inner loop's group, then
// between site leaders through an Exchange, over the same links and codecs
// DiLoCo uses), so one AdamW update is applied identically everywhere, as DDP
// would do over those links. The baseline DiLoCo is measured against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/topology.h"
#include "inner/inner_loop.h"
#include "outer/exchange.h"

namespace diloco::outer {

class DataParallelSync final : public inner::GradientSync {
 public:
  // `exchange` is used on site leaders only (nullptr elsewhere); it runs over
  // comms.leaders. Each site's share is its ranks' share of all ranks.
  DataParallelSync(comm::SiteComms& comms, Exchange* exchange);

  // Leaders: the exchange between sites; then every rank takes its leader's result.
  void sync(std::span<float> grads, std::int64_t step) override;

  // What the syncs since the last call cost: exchanges (leaders) and the time
  // this rank spent in sync() (its exposed communication).
  struct Totals {
    std::vector<ExchangeStats> exchanges;
    double seconds = 0.0;
  };
  Totals take();

 private:
  comm::SiteComms& comms_;
  Exchange* exchange_;
  std::vector<float> shares_;
  Totals totals_;
};

}  // namespace diloco::outer
