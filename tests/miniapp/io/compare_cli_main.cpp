// Test-only driver of `compare` (the same CompareTool the minipipe driver attaches), so ctest
// can check its exit codes and output on files the MPI tests leave behind, next to h5diff.
#include <CLI/CLI.hpp>

#include <iostream>

#include "miniapp/tools/compare_tool.hpp"

int main(int argc, char** argv) {
  CLI::App app{"HDF5 dump comparison (test driver)"};
  app.require_subcommand(1);
  minipipe::CompareTool tool;
  tool.attach(app);
  CLI11_PARSE(app, argc, argv);
  return tool.run(std::cout);
}
