// Kokkos' start and end for the driver, behind a header with no Kokkos in it, so main.cpp (the
// command line) is host-only code that no device compiler has to parse.
#pragma once

#include <string>
#include <vector>

namespace minipipe {

// Kokkos::initialize with the driver's --kokkos-* arguments (args[0] is the program name).
// Returns "" or the error message naming the offending option and what is allowed.
std::string initialize_kokkos(std::vector<char*> args);

void finalize_kokkos();

}  // namespace minipipe
