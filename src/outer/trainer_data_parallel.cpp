// Data parallelism between sites launched apart (docs/membership.md, "Data
// parallelism"). Every inner step's exchange is a point of progress: a site
// that applied step s's average says so to the membership
// (set_parts_done). A loss during a step's exchange is recovered inside
// that step: a survivor that did not apply the step takes the average of
// one that did (every survivor that applied it got every member's share,
// so they applied the same), else every survivor exchanges its own
// gradients again over the survivors. A survivor is at most one step
// behind another: nobody applies step s + 1 before every member sent its
// gradients of it, which each does only after applying step s. With the
// same average and the same optimizer state, every survivor takes the same
// step, so the params stay identical without sending them.
#include <algorithm>
#include <cstring>

#include "outer/trainer.h"

namespace diloco::outer {
namespace {

constexpr int kStepTag = 9211;

}  // namespace

class Trainer::StepRecovery final : public DataParallelSync::Recovery {
 public:
  explicit StepRecovery(Trainer& t) : t_(t) {}

  // Equal shares: each member is one site, whose ranks the site's own sum
  // already averaged (sites launched apart each weigh as one).
  std::vector<float> shares() override {
    if (!t_.minority_.empty()) return {};
    t_.syncs_.front().exchange->set_epoch(t_.membership_->epoch());
    const int n = t_.comms_.leaders->size();
    return std::vector<float>(static_cast<std::size_t>(n), 1.0f / static_cast<float>(n));
  }

  bool recover(const std::string& why, std::span<float> grads) override {
    if (t_.recover_or_stop(why, t_.between_steps_) != AfterLoss::kAdopted) return false;
    std::copy(t_.step_average_.begin(), t_.step_average_.end(), grads.begin());
    return true;
  }

  void applied(std::span<const float> average) override {
    t_.at_phase("exchanged", t_.between_steps_.round);
    t_.step_average_.assign(average.begin(), average.end());
    ++t_.steps_done_;
    t_.membership_->set_parts_done(t_.between_steps_.round - 1, t_.steps_done_);
  }

 private:
  Trainer& t_;
};

void Trainer::use_step_recovery() {
  if (!data_parallel_ || !membership_) return;
  step_recovery_ = std::make_unique<StepRecovery>(*this);
  data_parallel_->set_recovery(step_recovery_.get());
}

// The average of the step the survivors agreed on, from the survivor that
// applied it to those that did not.
void Trainer::send_step_average(const std::vector<int>& to) {
  std::vector<std::byte> bytes(step_average_.size() * sizeof(float));
  std::memcpy(bytes.data(), step_average_.data(), bytes.size());
  seal(bytes, sealing_context("step", steps_done_, comms_.leaders->rank()));
  for (int r : to) comms_.leaders->send(bytes, r, kStepTag);
}

void Trainer::receive_step_average(int from) {
  std::vector<std::byte> bytes(global_.size() * sizeof(float) + (auth_ ? sizeof(comm::MacTag) : 0));
  comms_.leaders->recv(bytes, from, kStepTag);
  if (!unseal(bytes, sealing_context("step", steps_done_ + 1, from)))
    throw comm::CommError("the step's average from site rank " + std::to_string(from) +
                              " failed its key check (tampered on the way?)",
                          from);
  step_average_.resize(global_.size());
  std::memcpy(step_average_.data(), bytes.data(), step_average_.size() * sizeof(float));
}

}  // namespace diloco::outer
