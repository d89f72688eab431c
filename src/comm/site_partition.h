// Sites from a measured link graph: ranks joined by fast links form a site,
// slow links run between sites. Pure computation on a bandwidth matrix (no
// communication), so `plan --cluster` and a launch with
// topology.site_by = "links" cut the same way.
#pragma once

#include <string>
#include <vector>

namespace diloco::comm {

// The rule: sort the bandwidths of all pairs of ranks, fastest first, and
// find the first drop between neighbours by a factor of at least `gap`. The
// pairs above it are fast links, and the sites are the groups of ranks that
// fast links join (connected components). Without such a drop no link stands
// out and all ranks form one site. The first drop, not the largest: sites
// are the fastest tier, so uneven links between sites (1 Gbit/s to one,
// 20 Mbit/s to another) cannot merge sites. A bandwidth of 0 means too fast
// to measure (faster than any measured one).
struct SitePartition {
  std::vector<int> site_of_rank;  // sites numbered by their first rank
  int num_sites = 1;
  double threshold_bytes_per_s = 0.0;  // slowest fast link; 0 when nothing was cut
  double drop = 1.0;  // the ratio cut at; without a cut, the largest ratio between neighbouring bandwidths
  // Why, in a few lines: the drop and where it was, each site's slowest
  // internal link and fastest link out, and any site whose ranks are joined
  // only through others (not every internal pair fast).
  std::string explanation;
};

// `bandwidth[a][b]`: bytes/s measured between ranks a and b (symmetric, the
// diagonal ignored). Throws std::invalid_argument for a matrix that is not
// square, a negative or non-finite entry, or gap < 1.
SitePartition partition_by_links(const std::vector<std::vector<double>>& bandwidth, double gap);

}  // namespace diloco::comm
