// What a training run needs around its session: the codec and exchange
// options a recipe asks for, stop signals, the watchdog's limits, and how a
// failure one rank meets ends the job.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "app/recipe.h"
#include "diloco/compression/codec.h"
#include "inner/inner_loop.h"
#include "outer/exchange.h"

namespace diloco::app {

// The exit code of a site that stopped because it was not in the majority.
constexpr int kMinorityExit = 4;

// The codec settings of a recipe's [compression] section, and its codec
// (make_codec throws RecipeError for one the recipe cannot build).
compression::CodecConfig codec_config(const CompressionConfig& c);
std::unique_ptr<compression::Codec> make_codec(const CompressionConfig& c);
outer::ExchangeOptions exchange_options(const Recipe& r);

// SIGTERM, SIGINT and SIGUSR1 then set a flag read at round boundaries.
void install_stop_handlers();
bool stop_signal_received();

// The watchdog's limits inside a site, before the first round ends and after.
double startup_timeout(const Recipe& r);
double steady_timeout(const Recipe& r);

// One device's dense peak for MFU, in TFLOP/s (0: unknown, no MFU), and a
// line saying where it came from.
struct Peak {
  double tflops = 0.0;
  std::string source;
};
// metrics.peak_tflops when set; else on CUDA the data-sheet peak of the
// device's model at the run's precision; else none (a CPU has no such
// figure: measure one and set metrics.peak_tflops).
Peak device_peak(const Recipe& r, const inner::DeviceConfig& device);

// Prints what ended this rank and aborts the whole job with its exit code.
[[noreturn]] void end_job(std::exception_ptr error, int rank);

}  // namespace diloco::app
