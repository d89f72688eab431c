// The [debug] section: test-only faults, every one off by default.
#include "app/recipe_key.h"

namespace diloco::app::recipe_keys {
namespace {

using R = Recipe;

// Where a site leader can be made to fail (app/debug_faults.h); empty: nowhere.
std::vector<std::string> fault_phases() {
  std::vector<std::string> phases = {"", "inner", "exchange", "exchanged", "admission", "recovery"};
  for (const char* step : {"hello", "queued", "port", "ready", "connected", "merged"})
    phases.push_back(std::string("join-") + step);
  return phases;
}

}  // namespace

// debug: injected faults for the tests.
void debug_keys(std::vector<Key>& k) {
  k.push_back(integer_key("debug", "forge_site", &R::debug, &DebugSection::forge_site, -1, 1 << 20));
  k.push_back(integer_key("debug", "forge_round", &R::debug, &DebugSection::forge_round, 0, 1 << 30));
  k.push_back(integer_key("debug", "nan_site", &R::debug, &DebugSection::nan_site, -1, 1 << 20));
  k.push_back(integer_key("debug", "nan_round", &R::debug, &DebugSection::nan_round, 0, 1 << 30));
  k.push_back(integer_key("debug", "diverge_site", &R::debug, &DebugSection::diverge_site, -1, 1 << 20));
  k.push_back(integer_key("debug", "diverge_round", &R::debug, &DebugSection::diverge_round, 0, 1 << 30));
  k.push_back(integer_key("debug", "exit_rank", &R::debug, &DebugSection::exit_rank, -1, 1 << 20));
  k.push_back(integer_key("debug", "exit_step", &R::debug, &DebugSection::exit_step, 0, kBig));
  k.push_back(integer_key("debug", "throw_rank", &R::debug, &DebugSection::throw_rank, -1, 1 << 20));
  k.push_back(integer_key("debug", "throw_step", &R::debug, &DebugSection::throw_step, 0, kBig));
  k.push_back(integer_key("debug", "freeze_rank", &R::debug, &DebugSection::freeze_rank, -1, 1 << 20));
  k.push_back(integer_key("debug", "freeze_step", &R::debug, &DebugSection::freeze_step, 0, kBig));
  k.push_back(integer_key("debug", "slow_site", &R::debug, &DebugSection::slow_site, -1, 1 << 20));
  k.push_back(number_key("debug", "slow_factor", &R::debug, &DebugSection::slow_factor,
                         [](double v) { return v >= 1.0 && v <= 1000.0; }, "in [1, 1000]"));
  k.push_back(integer_key("debug", "fault_site", &R::debug, &DebugSection::fault_site, -1, 1 << 20));
  k.push_back(string_key("debug", "fault_signal", &R::debug, &DebugSection::fault_signal, {"kill", "stop", "exit", "timeout"}));
  k.push_back(string_key("debug", "fault_phase", &R::debug, &DebugSection::fault_phase, fault_phases(), true));
  k.push_back(integer_key("debug", "fault_round", &R::debug, &DebugSection::fault_round, 0, 1 << 30));
}

}  // namespace diloco::app::recipe_keys
