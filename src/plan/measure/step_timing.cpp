// Timing a rank's inner step (see step_timing.h).
#include "plan/measure/step_timing.h"

#include <algorithm>
#include <chrono>

#include "inner/data/dataset.h"


namespace diloco::plan {
namespace {

// Steps timed while `bursts` run (see measure_model); stops them on every
// path, so no rank's comm thread waits on one that has left. Sets
// m.overlap_slowdown, m.exchanges and m.controls.
void time_in_bursts(inner::InnerLoop& loop, std::unique_ptr<BackgroundBursts> bursts, MeasuredModel& m) {
  struct Stopper {
    BackgroundBursts* b;
    bool done = false;
    ~Stopper() {
      if (!done) try {
          b->stop();
        } catch (...) {  // the error that unwound is the one to report
        }
    }
  } stopper{bursts.get()};
  double on = 0.0, off = 0.0;
  int on_steps = 0, off_steps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0.0;
  constexpr std::uint64_t kBursts = 6;  // phase() counts a burst's start and end
  while (elapsed < 6.0 || ((on_steps < 5 || off_steps < 5 || bursts->phase() < 2 * kBursts) && elapsed < 60.0)) {
    const auto phase = bursts->phase();
    const auto t0 = std::chrono::steady_clock::now();
    loop.run(1);
    const auto t1 = std::chrono::steady_clock::now();
    if (bursts->phase() == phase) {
      const double s = std::chrono::duration<double>(t1 - t0).count();
      if (phase % 2 == 1) {
        on += s;
        ++on_steps;
      } else {
        off += s;
        ++off_steps;
      }
    }
    elapsed = std::chrono::duration<double>(t1 - start).count();
  }
  stopper.done = true;
  bursts->stop();
  m.exchanges = bursts->exchange_seconds();
  m.controls = bursts->control_seconds();
  m.overlap_slowdown = on_steps == 0 || off_steps == 0 ? 0.0 : (on / on_steps) / (off / off_steps);
}

}  // namespace

MeasuredModel measure_model(const StepSetup& setup, const inner::DeviceConfig& device, bool time_steps,
                            const std::function<void()>& ready,
                            const std::function<std::unique_ptr<BackgroundBursts>(std::size_t, double)>& traffic) {
  MeasuredModel m;
  inner::prepare_host_compute(setup.threads);
  inner::SoloGroup solo;
  inner::InnerLoop loop(setup.model, setup.optim, setup.data, *setup.dataset, {}, solo, setup.seed, 1000, device);
  m.params = loop.num_params();
  if (!time_steps) return m;
  if (ready) ready();
  loop.run(5);
  if (ready) {
    // Lined up with the other ranks: all step for the same stretch of wall
    // time, so each sees the sharing of cores training will (one that
    // stopped early would leave the others more than they get).
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0.0;
    do {
      loop.run(1);
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      m.steps.push_back(now - elapsed);
      elapsed = now;
    } while (elapsed < 5.0 || m.steps.size() < 8);
    m.step_s = elapsed / static_cast<double>(m.steps.size());
    if (traffic) {
      ready();
      time_in_bursts(loop, traffic(m.params, m.step_s), m);
    }
    return m;
  }
  std::vector<double> samples;
  for (int i = 0; i < 7; ++i) samples.push_back(loop.run(4).seconds / 4.0);
  std::sort(samples.begin(), samples.end());
  m.step_s = samples[samples.size() / 2];
  return m;
}

}  // namespace diloco::plan
