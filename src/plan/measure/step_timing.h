// Timing a rank's inner step on this machine: what `plan` measures when no
// step time is given, and what `probe --all-ranks` records for every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "inner/inner_loop.h"

namespace diloco::plan {

// What a rank's inner steps are: the recipe's model, inner optimizer, data
// and threads, and the dataset already loaded (it must outlive the timing).
struct StepSetup {
  inner::ModelConfig model;
  inner::InnerOptimConfig optim;
  inner::DataConfig data;
  const inner::Dataset* dataset = nullptr;
  int threads = 1;
  std::uint64_t seed = 0;
};

// The model built on `device`: its parameter count and (with `time_steps`)
// its inner-step time in seconds, the median of a few short runs after a
// warm-up, so one slow burst of the machine does not set it. Throws
// inner::DataError or inner::ModelError.
struct MeasuredModel {
  std::size_t params = 0;
  double step_s = 0.0;
  std::vector<double> steps;     // lined up (`ready` given): each timed step, in order
  double overlap_slowdown = 0.0;  // with `traffic`: a step in a burst over a step between bursts; 0: not measured
  std::vector<double> exchanges;  // with `traffic`: each burst exchange's duration (s), in order
  std::vector<double> controls;   // and of the small all-reduce right after each
};

// Exchanges a comm thread runs in bursts while steps are timed (the probe's
// stand-in for an overlapped exchange). phase() is odd while a burst is in
// flight and even between bursts, and changes at every start and end.
class BackgroundBursts {
 public:
  virtual ~BackgroundBursts() = default;
  virtual std::uint64_t phase() const = 0;
  // Ends the bursts (on every rank taking part); rethrows the thread's error.
  virtual void stop() = 0;
  // After stop(): how long each exchange took (s), in order, and each small
  // all-reduce the ranks ran right after it.
  virtual std::vector<double> exchange_seconds() const = 0;
  virtual std::vector<double> control_seconds() const = 0;
};

// `ready`, when given, runs once the model and data are built and before
// any step is timed (the probe lines every rank up there, so all time their
// steps at once, as they will train); the step is then the mean over 5 s of
// steps (8 at least), the same stretch of time on every rank. `traffic`,
// when given too, runs after `ready` runs again (with the parameter count and
// the mean step) and starts bursts; steps are then timed for 6 s more, and
// on until 6 bursts have ended (a slow exchange fills a burst alone: the
// planner's measure of an exchange is the mean of 6 at least) and 5 steps
// lay wholly in bursts and 5 wholly between (60 s at most; one
// that a burst starts or ends during is dropped), and overlap_slowdown is
// the mean of the first over the mean of the second (0 when either is
// missing): bursts and rests alternate every second or so, so a machine
// that speeds up or slows down over seconds weighs on both alike. Stopping
// the bursts waits for every rank taking part to stop them; `exchanges` then
// holds the bursts' exchange times.
MeasuredModel measure_model(
    const StepSetup& setup, const inner::DeviceConfig& device, bool time_steps, const std::function<void()>& ready = {},
    const std::function<std::unique_ptr<BackgroundBursts>(std::size_t, double)>& traffic = {});

}  // namespace diloco::plan
