// `diloco probe RECIPE`: measure the links between site leaders (under mpirun).
#pragma once

#include <string>

#include "app/recipe.h"

namespace diloco::app {

// Prints the latency/bandwidth matrix and writes OUT/links.json; returns the
// exit code.
int run_probe(const Recipe& recipe, int* argc, char*** argv);

}  // namespace diloco::app
