// What `diloco train` prints: the start-up banner, one line per round, the
// closing summary table.
#pragma once

#include <string>

#include "app/recipe.h"
#include "comm/topology.h"
#include "inner/data/dataset.h"
#include "inner/inner_loop.h"
#include "metrics/rate_meter.h"
#include "outer/trainer.h"

namespace diloco::app {

std::string human_bytes(double bytes);
// 2450000 -> "2.45M".
std::string human_count(double count);
// One round; with its rates: tokens/s, MFU (where known) and the time left.
std::string round_line(const outer::RoundMetrics& m, int rounds, const metrics::Rates& rates = {});
// The rates' part of a round line: "  12.3K tok/s  MFU 41.0%  left 3m05s".
std::string rates_text(const metrics::Rates& rates);
// One change of membership between sites launched apart, as a line.
std::string membership_line(const comm::MembershipChange& c, int round);
// Peak resident memory of this process so far, in bytes.
double peak_rss_bytes();
void print_summary(const outer::RunSummary& s, int sites, int ranks, double peak_rss);

// The run's set-up as rank 0 prints it before training: sites, model, data,
// device, launch and the effective recipe.
struct Banner {
  const Recipe& recipe;
  const comm::Topology& topology;
  const comm::LaunchInfo& launch;
  const inner::Dataset& data;
  std::size_t params;
  const inner::DeviceConfig& device;
  const char* intra_site;
};
void print_banner(const Banner& b);

}  // namespace diloco::app
