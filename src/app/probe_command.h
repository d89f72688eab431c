// `diloco probe RECIPE`: measure the links between site leaders (under mpirun).
#pragma once

#include <string>

#include "app/recipe.h"

namespace diloco::app {

// Prints the latency/bandwidth matrix and writes OUT/links.json; with
// `all_ranks`, measures every pair of ranks and every rank's step time and
// writes OUT/cluster.json. Returns the exit code.
int run_probe(const Recipe& recipe, bool all_ranks, int* argc, char*** argv);

}  // namespace diloco::app
