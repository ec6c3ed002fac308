// The HDF5 dump layout of docs/design.md §5 as a checklist: for a dump's level, every promised
// dataset present with its shape and type, nothing else outside /meta, the /meta attributes set.
#pragma once

#include <string>
#include <vector>

#include "gpt2_reference.hpp"
#include "miniapp/io/dump_reader.hpp"

namespace minipipe::reference {

// What /meta says about the run (the deck text is the effective TOML the run used).
struct RunInfo {
  Shape shape;
  int B = 0, steps = 0, p = 0, v = 0, m = 0;
  std::string level;       // loss | grads | full | kernels (output.dump_level of the deck)
  std::string schedule;    // /meta@schedule
  std::string mode;        // deterministic | fast
  std::string float_type;  // "f32" or "f64": the type of every floating-point tensor
  Optimizer opt;
  std::string deck;
};

// Reads /meta (attributes and the deck text); throws io::ReadError or std::runtime_error.
RunInfo read_run_info(const io::DumpReader& r);

// Every problem found, one line each (empty: the dump matches the schema).
std::vector<std::string> check_schema(const io::DumpReader& r, const RunInfo& info);

// "/step_0003"
std::string step_group(int step);

}  // namespace minipipe::reference
