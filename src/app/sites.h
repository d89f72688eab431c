// The site cut a recipe asks for on this launch (rank blocks or nodes), the
// communicators for it, and the recipe's emulated links around the leaders.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "app/recipe.h"
#include "comm/membership.h"
#include "comm/mpi_communicator.h"

namespace diloco::app {

// Collective over MPI_COMM_WORLD; every rank reaches the same verdict, so a
// RecipeError (the cut does not fit this launch) is thrown on all of them.
// `links` (the recipe's emulator, or nullptr) is put around the leaders'
// communicator.
// With topology.join = "rendezvous" the launch is one site and has no
// leaders' communicator until join_sites().
comm::SiteComms make_sites(const Recipe& recipe, std::shared_ptr<comm::LinkEmulator> links);

// topology.join = "rendezvous", on the site leader: joins (or founds) the
// run's group through the rendezvous and puts the leaders' communicator into
// `comms`; nullptr on other ranks. `links` (the recipe's emulator, or
// nullptr) is put around it, each rank emulated as the site it is now.
// `at_join_step` (test-only, may be empty) is called at each step of joining.
// Throws comm::JoinError.
std::unique_ptr<comm::Membership> join_sites(const Recipe& recipe, comm::SiteComms& comms, const std::string& signature,
                                             double tokens_per_step, const comm::MessageAuth* auth,
                                             std::shared_ptr<comm::LinkEmulator> links,
                                             std::function<void(const char* step)> at_join_step);

}  // namespace diloco::app
