// Data parallelism across sites: every inner step's gradients are averaged
// over every rank of every site (inside a site by the inner loop's group, then
// between site leaders through an Exchange, over the same links and codecs
// DiLoCo uses), so one AdamW update is applied identically everywhere, as DDP
// would do over those links. The baseline DiLoCo is measured against.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/topology.h"
#include "inner/inner_loop.h"
#include "outer/exchange.h"

namespace diloco::outer {

class DataParallelSync final : public inner::GradientSync {
 public:
  // Sites launched apart: a member lost during a step's exchange is
  // recovered inside that step (site leaders only).
  class Recovery {
   public:
    virtual ~Recovery() = default;
    // Before each exchange: one share per member of the present membership
    // (empty: this site left the group and steps on its own gradients).
    virtual std::vector<float> shares() = 0;
    // A member was lost during the exchange; `grads` hold this site's own
    // again. True when they now hold the average the group applied (this
    // site was behind); false when the survivors exchange them again.
    virtual bool recover(const std::string& why, std::span<float> grads) = 0;
    // The step's average, applied by this site.
    virtual void applied(std::span<const float> average) = 0;
  };

  // `exchange` is used on site leaders only (nullptr elsewhere); it runs over
  // comms.leaders. Each site's share is its ranks' share of all ranks.
  DataParallelSync(comm::SiteComms& comms, Exchange* exchange);
  void set_recovery(Recovery* recovery) { recovery_ = recovery; }

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
  ExchangeStats exchange_apart(std::span<float> grads, std::int64_t step);

  Exchange* exchange_;
  Recovery* recovery_ = nullptr;
  std::vector<float> shares_;
  std::vector<float> own_;       // sites launched apart: this site's gradients, for a redo
  std::vector<float> residual_;  // and the error-feedback residual before the exchange
  Totals totals_;
};

}  // namespace diloco::outer
