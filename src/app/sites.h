// The site cut a recipe asks for on this launch (rank blocks or nodes), the
// communicators for it, and the recipe's emulated links around the leaders.
#pragma once

#include "app/recipe.h"
#include "comm/mpi_communicator.h"

namespace diloco::app {

// Collective over MPI_COMM_WORLD; every rank reaches the same verdict, so a
// RecipeError (the cut does not fit this launch) is thrown on all of them.
// `links` (the recipe's emulator, or nullptr) is put around the leaders'
// communicator.
comm::SiteComms make_sites(const Recipe& recipe, std::shared_ptr<comm::LinkEmulator> links);

}  // namespace diloco::app
