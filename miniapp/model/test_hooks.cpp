// Which test hooks are set, so that no hook changes a run without the run saying so. The ctest
// test_hooks_visible checks that every hook variable the sources read is in kHooks.
#include "miniapp/model/test_hooks.hpp"

#include <cstdlib>

namespace minipipe {

namespace {

// Every hook the code reads: delays (time), the staged-post order (time), the one-ULP
// perturbation (bits), the kill in a checkpoint write (the run dies), the simulated GPU team
// executor of the launch-shape tests (same bits, far slower: kernels/team_sim.hpp), the wide
// gradient range that forces the compact all-reduce's full-limb fallback (same bits).
const char* const kHooks[] = {"MINIPIPE_TEST_DELAY_FORWARD",       "MINIPIPE_TEST_DELAY_SEND",
                              "MINIPIPE_TEST_DEFER_STAGED_POSTS",  "MINIPIPE_TEST_PERTURB",
                              "MINIPIPE_FAULT_KILL_IN_CHECKPOINT", "MINIPIPE_TEST_TEAM_SIM",
                              "MINIPIPE_TEST_WIDE_GRADIENT"};

}  // namespace

std::vector<std::string> active_test_hooks() {
  std::vector<std::string> out;
  for (const char* name : kHooks)
    if (const char* v = std::getenv(name); v && *v) out.push_back(std::string(name) + "=" + v);
  return out;
}

std::string active_test_hooks_text() {
  std::string t;
  for (const auto& h : active_test_hooks()) t += (t.empty() ? "" : ", ") + h;
  return t;
}

}  // namespace minipipe
