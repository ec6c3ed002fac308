// `minipipe compare A B`: the command line of the dump comparison, attached to the driver's
// CLI11 app as a subcommand; run() returns h5diff-style exit codes (0 same, 1 differ, 2 error).
#pragma once

#include <CLI/CLI.hpp>

#include <iostream>
#include <ostream>
#include <string>

#include "miniapp/io/compare.hpp"

namespace minipipe {

struct CompareTool {
  CLI::App* sub = nullptr;

  // Adds "compare A B [--include-meta] [--rtol X] [--atol X] [--norm-rtol X] [-v]" to `parent`.
  void attach(CLI::App& parent);
  // Call after parsing when sub->parsed(); prints the report to `out`, an error (exit 2) to `*err`
  // through the tools' one error path ("minipipe: error: ...").
  int run(std::ostream& out);

  std::ostream* err = &std::cerr;  // where the error message goes (tests redirect it)
  std::string file_a, file_b;
  io::CompareOptions options;

 private:
  double rtol_ = 0.0, atol_ = 0.0, norm_rtol_ = 0.0;
  CLI::Option* rtol_opt_ = nullptr;
  CLI::Option* atol_opt_ = nullptr;
  CLI::Option* norm_opt_ = nullptr;
};

}  // namespace minipipe
