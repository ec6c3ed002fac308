// `minipipe schedule`: generate or load a pipeline schedule, validate, simulate and draw it.
// The command-line face of the schedules library; main.cpp only attaches, parses and runs it.
#pragma once

#include <iostream>
#include <ostream>
#include <string>

namespace CLI {
class App;
}

namespace minipipe {

struct ScheduleTool {
  CLI::App* sub = nullptr;  // the "schedule" subcommand, set by attach()

  // Options (defaults shown by --help).
  std::string schedule = "1f1b";
  int p = 4;
  int m = 8;
  int v = 0;           // 0 = the schedule's own default
  int group = 0;       // interleaved-1f1b micro-batch group; 0 = p
  int memory_cap = 0;  // zb-mem stored micro-batches per rank; 0 = p
  std::string cost = "F=1,I=1,W=1";
  double comm = 0;
  std::string csv_out, csv_layout = "compact";
  std::string svg_out, trace_out, json_out;
  std::string load_csv, placement = "auto";
  std::string grid = "auto";
  bool list = false;
  bool markdown = false;
  bool force = false;  // replace existing output files

  std::ostream* err = &std::cerr;  // where error messages go (tests redirect it)

  // Adds the subcommand "schedule" with all flags to `parent`.
  void attach(CLI::App& parent);

  // After parsing: prints the grid and the numbers to `out`, writes the requested files
  // (atomically, io::write_output_file). Returns 0; 2 after one error message to *err for bad
  // input (schedule, CSV, costs, paths); 3 when writing an output failed.
  int run(std::ostream& out);
};

}  // namespace minipipe
