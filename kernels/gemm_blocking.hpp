// Cache blocking of the packed host GEMM (kernels/gemm.cpp), chosen once per process from the CPU's
// cache sizes (cpu_info.hpp). Bits never depend on it: every output is one FMA chain in k order,
// carried through C between k-blocks (docs/design.md §4 rule 1).
#pragma once

#include <cstddef>
#include <string>

#include "cpu_info.hpp"

namespace minipipe {

// One scalar type's blocks: the register tile MR x NR (fixed by the build's microkernel) and the
// cache blocks MC (rows of A per L2 block), KC (largest k-block) and NC (columns of B per outer block).
struct GemmBlocks {
  int mr = 0, nr = 0, mc = 0, kc = 0, nc = 0;
};

struct GemmBlocking {
  GemmBlocks f32, f64;
  // gemm_det_exact (float only): rows and columns of dW per block, and the bytes of packed A that a
  // group of samples may fill (group = budget / (K x mc x 4), at least 1).
  int exact_mc = 0, exact_nc = 0;
  std::size_t exact_budget = 0;
  bool assumed = false;  // the cache sizes were unknown: the built-in blocking
};

// The blocking for `cpu` (a pure function of it; tests feed it described CPUs).
GemmBlocking choose_gemm_blocking(const CpuInfo& cpu);

// The register tile of a build that uses `isa` (AVX-512: 12 x 32 floats; AVX2 and scalar: 6 x 16).
GemmBlocks register_tile_f32(HostIsa isa);
GemmBlocks register_tile_f64(HostIsa isa);

// The blocking the packed GEMM uses in this process: choose_gemm_blocking(host_cpu_info()) unless
// set_gemm_blocking replaced it (benchmark sweeps, tests). A GemmOptions field that is not zero
// still overrides its block for one call. Not thread-safe against running GEMMs: set it first.
const GemmBlocking& gemm_blocking();
void set_gemm_blocking(const GemmBlocking& b);

// Samples whose packed A fill b.exact_budget at sample depth K (at least 1).
int exact_group_for(const GemmBlocking& b, int K);

// "float tile 12x32, MC 192 KC 256 NC 4096; double tile 12x16, MC 96 KC 256 NC 4096; exact MC 192
// NC 1024, group budget 768 KiB".
std::string describe(const GemmBlocking& b);

}  // namespace minipipe
