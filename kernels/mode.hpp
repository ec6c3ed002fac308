// The arithmetic mode of a run, in a header with no Kokkos so host-only code (decks, reports,
// verification) can name it without the device compiler parsing Kokkos.
#pragma once

namespace minipipe {

// deterministic: bitwise reproducible by construction (docs/design.md §4).
// fast: vendor GEMM through Kokkos Kernels and libm; compared to deterministic within a tolerance.
enum class Mode { deterministic, fast };

inline const char* to_string(Mode m) {
  return m == Mode::deterministic ? "deterministic" : "fast";
}

}  // namespace minipipe
