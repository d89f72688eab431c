// Banner, round lines and summary of `diloco train`.
#include "app/train_report.h"

#include <sys/resource.h>

#include <cstdio>
#include <sstream>

namespace diloco::app {

namespace {

// 1234567 with units {"", "K", "M", ...} and separator " " -> "1.23 M".
std::string scaled(double value, const char* const (&units)[5], const char* separator) {
  int u = 0;
  while (value >= 1000.0 && u < 4) {
    value /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f%s%s" : "%.2f%s%s", value, separator, units[u]);
  return buf;
}

}  // namespace

std::string human_bytes(double bytes) {
  static const char* const kUnits[5] = {"B", "KB", "MB", "GB", "TB"};
  return scaled(bytes, kUnits, " ");
}

std::string human_count(double count) {
  static const char* const kUnits[5] = {"", "K", "M", "G", "T"};
  return scaled(count, kUnits, "");
}

std::string rates_text(const metrics::Rates& rates) {
  std::string out;
  if (rates.tokens_per_s) out += "  " + human_count(*rates.tokens_per_s) + " tok/s";
  if (rates.mfu) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "  MFU %.1f%%", 100.0 * *rates.mfu);
    out += buf;
  }
  if (rates.eta_s) out += "  left " + metrics::human_duration(*rates.eta_s);
  return out;
}

std::string round_line(const outer::RoundMetrics& m, int rounds, const metrics::Rates& rates) {
  char buf[256];
  const double share = m.wall_s > 0 ? 100.0 * m.comm_s / m.wall_s : 0.0;
  char eval[32] = "   -  ";
  if (m.eval_loss) std::snprintf(eval, sizeof(eval), "%6.3f", *m.eval_loss);
  std::snprintf(buf, sizeof(buf), "round %4d/%-4d H %-4d train %6.3f  eval %s  tokens %9lld  sent %10s  comm %5.1f%%  wall %7.1fs",
                m.round, rounds, m.H, m.train_loss, eval, static_cast<long long>(m.tokens),
                human_bytes(static_cast<double>(m.bytes_sent)).c_str(), share, m.wall_s);
  return buf + rates_text(rates);
}

std::string membership_line(const comm::MembershipChange& c, int round) {
  std::string names;
  for (const auto& n : c.joined.empty() ? c.left : c.joined) names += (names.empty() ? "" : ", ") + n;
  char buf[160];
  std::snprintf(buf, sizeof(buf), " (membership epoch %d, %.2f s)", c.epoch, c.seconds);
  if (!c.refused.empty()) {
    std::string refused;
    for (const auto& r : c.refused) refused += (refused.empty() ? "" : "; ") + r;
    return "round " + std::to_string(round) + ": refused at the door: " + refused +
           (c.joined.empty() ? std::string() : " (and " + names + " joined" + buf + ")");
  }
  if (!c.joined.empty()) return "round " + std::to_string(round) + ": " + names + " joined" + buf;
  return "round " + std::to_string(round) + ": lost " + names + buf + ": " + c.why;
}

double peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

void print_summary(const outer::RunSummary& s, int sites, int ranks, double peak_rss) {
  std::printf("\nsummary (%d sites, %d ranks)\n", sites, ranks);
  std::printf("  %-24s %12.4f\n", "start eval loss", s.initial_eval_loss);
  std::printf("  %-24s %12.4f\n", "final eval loss", s.final_eval_loss);
  std::printf("  %-24s %12d\n", "outer rounds", s.rounds);
  std::printf("  %-24s %12lld\n", "inner steps per site", static_cast<long long>(s.inner_steps));
  std::printf("  %-24s %12s\n", "bytes sent between sites", human_bytes(static_cast<double>(s.bytes_sent)).c_str());
  std::printf("  %-24s %11.1fs\n", "wall time", s.wall_s);
  std::printf("  %-24s %12s\n", "peak RSS (largest rank)", human_bytes(peak_rss).c_str());
  std::fflush(stdout);
}

void print_banner(const Banner& b) {
  const auto& topo = b.topology;
  std::ostringstream sizes;
  for (std::size_t s = 0; s < topo.site_sizes.size(); ++s) sizes << (s ? "+" : "") << topo.site_sizes[s];
  std::printf("diloco %s: %s | %d ranks in %d sites (%s) | %.2fM params | data: %s, %s tokens (held out %s)\n",
              DILOCO_VERSION, b.recipe.run.name.c_str(), topo.world_size, topo.num_sites, sizes.str().c_str(),
              static_cast<double>(b.params) / 1e6,
              b.data.description().c_str(), human_count(static_cast<double>(b.data.train().size() + b.data.eval().size())).c_str(),
              human_count(static_cast<double>(b.data.eval().size())).c_str());
  std::printf("device %s%s%s | gradients inside sites over %s | outer state in host memory\n",
              b.device.cuda ? "cuda:" : "cpu", b.device.cuda ? std::to_string(b.device.index).c_str() : "",
              b.device.precision == inner::Precision::kBf16 ? " (bf16 autocast, fp32 master weights)" : " (fp32)",
              b.intra_site);
  const auto& l = b.launch;
  std::printf("launched by %s: rank %d of %d, local rank %d of %d%s%s\n", l.launcher.c_str(), l.rank, l.size,
              l.local_rank, l.local_size, l.node >= 0 ? (", node " + std::to_string(l.node)).c_str() : "",
              l.restart_count > 0 ? (", SLURM_RESTART_COUNT " + std::to_string(l.restart_count)).c_str() : "");
  std::printf("--- effective recipe (also in %s/recipe.toml) ---\n%s---\n", b.recipe.run.out_dir.c_str(),
              to_toml(b.recipe).c_str());
  std::fflush(stdout);
}

}  // namespace diloco::app
