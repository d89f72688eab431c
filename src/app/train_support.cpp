// See train_support.h.
#include "app/train_support.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "comm/comm_error.h"
#include "comm/mpi_communicator.h"
#include "inner/data/dataset.h"
#include "metrics/rate_meter.h"

namespace diloco::app {
namespace {

// Set by SIGTERM, SIGINT and SIGUSR1; read at round boundaries.
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) { g_stop_signal = signal; }

}  // namespace

compression::CodecConfig codec_config(const CompressionConfig& c) {
  compression::CodecConfig config;
  config.name = c.codec;
  config.block = static_cast<std::uint32_t>(c.block);
  config.stochastic_rounding = c.stochastic_rounding;
  config.topk_ratio = c.topk_ratio;
  config.value_bits = static_cast<unsigned>(c.bits);
  return config;
}

std::unique_ptr<compression::Codec> make_codec(const CompressionConfig& c) {
  const compression::CodecConfig config = codec_config(c);
  std::string error;
  auto codec = compression::make_codec(config, &error);
  if (!codec) throw RecipeError("compression: " + error);
  return codec;
}

outer::ExchangeOptions exchange_options(const Recipe& r) {
  outer::ExchangeOptions o;
  o.error_feedback = r.compression.error_feedback.value_or(false);
  o.error_feedback_decay = static_cast<float>(r.compression.error_feedback_decay);
  o.max_norm_ratio = r.max_update_norm_ratio;
  o.seed = static_cast<std::uint64_t>(r.run.seed);
  o.algorithm = r.compression.exchange == "ring"         ? outer::ExchangeAlgorithm::kRing
                : r.compression.exchange == "all_gather" ? outer::ExchangeAlgorithm::kAllGather
                                                         : outer::ExchangeAlgorithm::kAuto;
  return o;
}

bool stop_signal_received() { return g_stop_signal != 0; }

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &action, nullptr);
}

// Inside a site the watchdog times every wait. With sites launched apart a
// rank may also wait for its leader's join (up to join_timeout_s) and, in a
// round, for one recovery between sites (a deadline, the ping and the
// redone exchange), so its limits grow by those.
double startup_timeout(const Recipe& r) {
  const double t = r.timeouts.startup_timeout_s;
  return r.topology.join == "rendezvous" ? std::max(t, r.rendezvous.join_timeout_s + 60.0) : t;
}
double steady_timeout(const Recipe& r) {
  const double t = r.timeouts.timeout_s;
  return r.topology.join == "rendezvous" ? 3.0 * t + 2.0 * r.rendezvous.ping_s + 30.0 : t;
}

// Prints what ended this rank and aborts the whole job with its exit code.
[[noreturn]] void end_job(std::exception_ptr error, int rank) {
  try {
    std::rethrow_exception(error);
  } catch (const inner::DataError& e) {
    // Met by one rank during training (an id out of range in a batch the
    // start-up sample did not cover): its peers are mid-step.
    std::cerr << "diloco: rank " << rank << ": error: data: " << e.what() << std::endl;
    comm::MpiSession::abort(2);
  } catch (const comm::CommError& e) {
    std::cerr << "diloco: rank " << rank << ": communication error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  } catch (const outer::ExchangeError& e) {
    std::cerr << "diloco: rank " << rank << ": exchange error: " << e.what() << std::endl;
    comm::MpiSession::abort(3);
  } catch (const std::exception& e) {
    std::cerr << "diloco: rank " << rank << ": internal error: " << e.what() << std::endl;
    comm::MpiSession::abort(1);
  } catch (...) {
    std::cerr << "diloco: rank " << rank << ": internal error: unknown exception" << std::endl;
    comm::MpiSession::abort(1);
  }
}

Peak device_peak(const Recipe& r, const inner::DeviceConfig& device) {
  char buf[200];
  if (r.observe.peak_tflops > 0.0) {
    std::snprintf(buf, sizeof(buf), "MFU: against %g TFLOP/s per rank (metrics.peak_tflops)", r.observe.peak_tflops);
    return {r.observe.peak_tflops, buf};
  }
  if (!device.cuda) return {0.0, "MFU: off on the CPU (set metrics.peak_tflops to a peak measured on this CPU)"};
  const std::string name = inner::cuda_device_name(device.index);
  const bool bf16 = device.precision == inner::Precision::kBf16;
  const double peak = metrics::datasheet_peak_tflops(name, bf16);
  if (peak <= 0.0)
    return {0.0, "MFU: off (" + name + " is not in the table of data-sheet peaks: set metrics.peak_tflops)"};
  std::snprintf(buf, sizeof(buf), "MFU: against %.1f TFLOP/s per GPU (%s data sheet, dense %s)", peak, name.c_str(),
                bf16 ? "bf16" : "fp32");
  return {peak, buf};
}

}  // namespace diloco::app
