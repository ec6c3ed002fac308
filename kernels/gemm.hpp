// Deterministic GEMM of miniPipe: C[M,N] = A[M,K]·B[K,N] where every element is one strictly
// sequential chain of explicit FMAs in k, so the bits depend on the inputs and K only.
#pragma once

#include <cstddef>
#include <string>

#include "gemm_blocking.hpp"
#include "grad_accum.hpp"
#include "types.hpp"
#include "workspace.hpp"

namespace minipipe {

// Read-only strided operand living in MemSpace: element (r, c) is data[r*rs + c*cs].
// A transpose is a swap of the two strides, so no operand is ever copied to be transposed.
template <class T>
struct StridedMat {
  const T* data = nullptr;
  std::ptrdiff_t rs = 0;  // distance between rows
  std::ptrdiff_t cs = 0;  // distance between columns
};

// Row-major matrix with leading dimension ld, read as is.
template <class T>
StridedMat<T> row_major(const T* data, std::ptrdiff_t ld) {
  return StridedMat<T>{data, ld, 1};
}
// Row-major matrix with leading dimension ld, read as its transpose: element (r, c) = data[c*ld + r].
template <class T>
StridedMat<T> transposed(const T* data, std::ptrdiff_t ld) {
  return StridedMat<T>{data, 1, ld};
}

// What happens to C once acc = sum_k A(m,k)·B(k,n) is formed:
//   overwrite:  C(m,n) = acc, or acc + bias[n] (one separate add) when bias is given;
//   accumulate: C(m,n) = C(m,n) + acc (one separate add; bias must be null);
//   chain_on_c: the chain starts from C(m,n) instead of 0 and its end is stored (no separate add;
//               bias must be null). Not the bits of accumulate: fast mode's running gradient sums,
//               where it spares the copy of the old C that accumulate needs over several k-blocks.
enum class GemmOut { overwrite, accumulate, chain_on_c };

// Which implementation runs. All give bitwise identical results (tests assert it); `automatic`
// takes the packed host path unless use_device_path() (kernel_path.hpp) picks the device path.
// generic is the device path: a register-tiled team kernel (a micro-tile of outputs per thread,
// operands through double-buffered level-0 scratch, one launch per batch).
enum class GemmPath { automatic, packed_simd, packed_scalar, generic };

// Cache blocking of the packed host path for one call; zero means the process's blocking
// (gemm_blocking(), chosen from the CPU's caches; its KC is the largest k-block, K is split into
// equal blocks of at most KC). Tests shrink these to exercise k-blocking and edge tiles on small
// shapes. mc/nc are rounded up to the register tile. No choice of them changes a bit.
struct GemmOptions {
  GemmPath path = GemmPath::automatic;
  int mc = 0;     // rows of A kept in L2 per work unit
  int kc = 0;     // depth of one k-block (acc is carried through C between k-blocks)
  int nc = 0;     // columns of B packed per outer block
  int group = 0;  // gemm_det_exact: samples whose limbs are summed before a fold (at most 256)
  int team = 0;   // device path: threads per team, a power of two up to 256 (0: one on a host
                  // backend, 256 on a GPU); tests run multi-thread teams on OpenMP with it
};

// A B operand packed for the host path and kept across calls: a weight that the GEMMs of several
// micro-batches read within one step is packed by the first call and reused by the others.
// Enabled, gemm_det reads the copy when it holds this B (same data pointer, strides, shape and
// blocking) and packs into it when not; disabled (the default), gemm_det packs into the workspace
// as always. The owner enables it only while B's values cannot change (a stage: from the start of
// a step's micro-batches until its gradients are final) and disables it, which drops the copy,
// before they may. Packing only copies, so reuse changes no bit. The device path ignores it.
template <class T>
struct PackedB {
  void enable() {
    on = true;
    valid = false;
  }
  void disable() {
    on = false;
    valid = false;
  }
  std::size_t bytes() const { return panels.extent(0) * sizeof(T); }

  bool on = false, valid = false;
  View1<T> panels;         // every (column block, k-block) of B as the microkernel reads it; kept when disabled
  const T* src = nullptr;  // what panels holds while valid
  std::ptrdiff_t rs = 0, cs = 0;
  int n = 0, k = 0, kc = 0, nc = 0;
};

// C (M,N) row-major with leading dimension ldc  =  A (M,K) · B (K,N)  [+ bias (N) | + C].
// Contract, for every (m, n):
//   acc = 0 (chain_on_c: C(m,n)); for k = 0..K-1: acc = fma_exact(A(m,k), B(k,n), acc);
//   then the GemmOut step.
// All pointers are in MemSpace. Call from host code, not from inside a kernel. C must not
// alias A, B or bias. Packing buffers come from ws (slots gemm_a, gemm_b, gemm_c); B's from
// packed instead when it is given and enabled (see PackedB).
template <class T>
void gemm_det(KernelWorkspace& ws, int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C, std::ptrdiff_t ldc,
              const T* bias = nullptr, GemmOut out = GemmOut::overwrite, PackedB<T>* packed = nullptr);

// The same with an explicit implementation and blocking (tests and benchmarks).
template <class T>
void gemm_det(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C,
              std::ptrdiff_t ldc, const T* bias = nullptr, GemmOut out = GemmOut::overwrite,
              PackedB<T>* packed = nullptr);

// gemm_det without a bias that also adds every row's sum of A into row_sums (M values in MemSpace):
//   r = 0; for k = 0..K-1: r = r + A(m,k);   then row_sums[m] += r
// (fast mode's bias gradient beside its backward-weight, A = dy^T). The packed paths form each
// chain from the packed A panels while they are in L1, and the device path from the A tiles in
// team scratch, so A is not read once more.
template <class T>
void gemm_det_row_sums(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A,
                       StridedMat<T> B, T* C, std::ptrdiff_t ldc, GemmOut out, T* row_sums);

// Exact accumulation of per-sample products (the deterministic backward-weight), fused into the
// GEMM: for every (m, n) and every sample s = 0..S-1,
//   p = 0; for k = 0..K-1: p = fma_exact(A_s(m,k), B_s(k,n), p);   then target(m*N + n) += p exactly,
// where A_s is A with its data advanced by s*a_step (B_s likewise) and the exact addition is that of
// ExactSum (docs/design.md §4 rule 2: the bits do not depend on how samples are split into calls, on
// their order, on opt or on the thread count). Each partial goes from the microkernel's tile to
// carry-save limbs while the tile is in L1 and is folded into the 128-bit accumulators once per
// group of samples, so no per-sample partial is ever written to memory. Host-accessible memory
// only (packed paths); buffers come from ws (slots dw_a, dw_b, dw_row_sums). opt.mc / opt.nc /
// opt.group set the blocking (opt.kc is unused: one sample's K is one k-block).
// With row_target (the bias gradient of a backward-weight, M accumulators), also for every m and s
//   r = 0; for k = 0..K-1: r = r + A_s(m,k);   then row_target(m) += r exactly,
// each chain formed from the packed A panel while it is in L1, so A is not read once more.
// target.known_zero (GradAccum::exact_target sets it when nothing was added since zero): the
// first fold stores the sums without reading the zeros. It describes the accumulators when the
// target was taken, so a target is good for one call (take a fresh one for the next).
// target.final_floats: when the call adds every sample in one fold to accumulators known to be zero,
// that fold also stores each sum converted as GradAccum::finalize converts it, final_floats[m*N + n]
// = float(ExactSum::to_double(sum)); the call then returns true (false: nothing stored there).
// With target.floats_only as well, such a call may leave the accumulators unwritten.
bool gemm_det_exact(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, int S, StridedMat<float> A,
                    std::ptrdiff_t a_step, StridedMat<float> B, std::ptrdiff_t b_step, const ExactTarget& target,
                    const ExactTarget* row_target = nullptr);

// Samples that gemm_det_exact with default options sums in limbs before each fold, for a sample
// depth K (a caller that holds samples back, e.g. Linear's deferral, groups this many): those whose
// packed A fills gemm_blocking().exact_budget.
int gemm_det_exact_group(int K);

// S independent products in one call, C_s (M,N) = A_s B_s [+ C_s], where A_s is A with its data
// advanced by s*a_step (B_s, C_s likewise): the per-sample partials of a backward-weight. The device
// path runs all samples in one launch; the host path runs gemm_det per sample. Same contract per
// element as gemm_det, no bias. With row_sums (M values a sample, sample s at row_sums + s*rs_step)
// it also stores each sample's row chains of gemm_det_row_sums, r = 0; for k: r = r + A_s(m,k)
// (the per-sample bias partials of a backward-weight, formed from the A tiles the GEMM reads).
template <class T>
void gemm_det_batched(KernelWorkspace& ws, int S, int M, int N, int K, StridedMat<T> A, std::ptrdiff_t a_step,
                      StridedMat<T> B, std::ptrdiff_t b_step, T* C, std::ptrdiff_t c_step, std::ptrdiff_t ldc,
                      GemmOut out = GemmOut::overwrite, T* row_sums = nullptr, std::ptrdiff_t rs_step = 0);

// Level-0 team scratch bytes of the device GEMM kernel (a function of T only); at most 40 KB so
// that it fits CUDA's and HIP's default shared memory per block (tests assert it).
template <class T>
std::size_t gemm_det_device_scratch_bytes();

// Whether this build's packed host path uses a SIMD register microkernel (AVX-512F or AVX2+FMA;
// else the scalar fma_exact microkernel, same bits), and a one-line description for reports.
bool gemm_det_has_simd();
const char* gemm_det_microkernel();
// "miniPipe gemm_det, " and where it runs now: the microkernel, or the device path.
std::string gemm_det_label();

extern template void gemm_det_batched<float>(KernelWorkspace&, int, int, int, int, StridedMat<float>, std::ptrdiff_t,
                                             StridedMat<float>, std::ptrdiff_t, float*, std::ptrdiff_t, std::ptrdiff_t,
                                             GemmOut, float*, std::ptrdiff_t);
extern template void gemm_det_batched<double>(KernelWorkspace&, int, int, int, int, StridedMat<double>, std::ptrdiff_t,
                                              StridedMat<double>, std::ptrdiff_t, double*, std::ptrdiff_t,
                                              std::ptrdiff_t, GemmOut, double*, std::ptrdiff_t);
extern template std::size_t gemm_det_device_scratch_bytes<float>();
extern template std::size_t gemm_det_device_scratch_bytes<double>();
extern template void gemm_det<float>(KernelWorkspace&, int, int, int, StridedMat<float>, StridedMat<float>, float*,
                                     std::ptrdiff_t, const float*, GemmOut, PackedB<float>*);
extern template void gemm_det<double>(KernelWorkspace&, int, int, int, StridedMat<double>, StridedMat<double>, double*,
                                      std::ptrdiff_t, const double*, GemmOut, PackedB<double>*);
extern template void gemm_det<float>(KernelWorkspace&, const GemmOptions&, int, int, int, StridedMat<float>,
                                     StridedMat<float>, float*, std::ptrdiff_t, const float*, GemmOut, PackedB<float>*);
extern template void gemm_det<double>(KernelWorkspace&, const GemmOptions&, int, int, int, StridedMat<double>,
                                      StridedMat<double>, double*, std::ptrdiff_t, const double*, GemmOut,
                                      PackedB<double>*);

}  // namespace minipipe
