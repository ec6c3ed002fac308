// How ranks agree on a message: every rank learns which rank's text wins and what it says, so
// that a failure seen on one rank only (a node-local file, a NaN in one stage) is reported once,
// by name, and every rank takes the same path afterwards.
#pragma once

#include <mpi.h>

#include <string>

namespace minipipe::util {

// Collective: `text` of rank `root`, on every rank.
std::string broadcast_text(MPI_Comm comm, int root, const std::string& text);

// Collective: the rank with the smallest `key` among those that pass `has` (ties: the lowest
// rank), and its `text`; root = -1 when no rank has one.
struct EarliestText {
  int root = -1;
  std::string text;
};
EarliestText earliest_text(MPI_Comm comm, bool has, double key, const std::string& text);

// Collective: the lowest rank that passes an error, and its message; root = -1 when none does.
EarliestText first_failure(MPI_Comm comm, const std::string* error);

}  // namespace minipipe::util
