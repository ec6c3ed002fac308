// The environment's test hooks (MINIPIPE_TEST_*, MINIPIPE_FAULT_*): which are set, so that a run
// they changed says so in its output, its JSON report and its dump's /meta.
#pragma once

#include <string>
#include <vector>

namespace minipipe {

// "NAME=value" of every test hook set to a non-empty value in this process's environment, in
// the order of the table in test_hooks.cpp; empty when none is.
std::vector<std::string> active_test_hooks();

// "NAME=value, NAME=value" of the above ("" when none).
std::string active_test_hooks_text();

}  // namespace minipipe
