// gemm_det implementations: a packed, register-tiled host path (AVX-512F, AVX2+FMA or scalar
// microkernel), the fused exact-accumulation variant of the deterministic backward-weight, and a
// tiled team kernel for device backends (batched over samples); identical bits by design.
#include "gemm.hpp"

#include "gemm_blocking.hpp"
#include "host_simd.hpp"
#include "kernel_path.hpp"
#include "team.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

// Host-only: the device passes of nvcc/hipcc never see the intrinsics (host_simd.hpp includes them
// for AVX-512F builds). The widest ISA the build targets is taken; every one gives the same bits
// (one rounding per explicit FMA, k in order).
#if defined(MINIPIPE_HOST_AVX512)
#define MINIPIPE_GEMM_AVX512 1
#elif !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define MINIPIPE_GEMM_AVX2 1
#endif

namespace minipipe {
namespace gemm_detail {

// Register tile MR x NR (MR rows x two SIMD vectors), fixed by the microkernel. The scalar
// microkernel uses the same tile, so the packed layouts do not depend on the microkernel. The cache
// blocks (MC x KC of A in L2, KC x NR of B in L1, KC x NC of B in L3) are chosen per CPU at run time
// (gemm_blocking.hpp); register_tile_f32/f64 there must name this tile.
template <class T>
struct Tile;
#ifdef MINIPIPE_GEMM_AVX512
template <>
struct Tile<float> {  // 24 zmm accumulators, 2 for B, 1 broadcast
  static constexpr int MR = 12, NR = 32;
};
template <>
struct Tile<double> {
  static constexpr int MR = 12, NR = 16;
};
#else
template <>
struct Tile<float> {  // 12 ymm accumulators
  static constexpr int MR = 6, NR = 16;
};
template <>
struct Tile<double> {
  static constexpr int MR = 6, NR = 8;
};
#endif
template <class T>
const GemmBlocks& blocks_of() {
  return std::is_same<T, float>::value ? gemm_blocking().f32 : gemm_blocking().f64;
}
constexpr int kUnitCols = 256;    // B columns per parallel work unit (the parallel grain)
constexpr int kChunkBlocks = 24;  // MC blocks of A packed at once (bounds the A buffer)
constexpr int kUnitPanelsA = 4;   // A micro-panels per work unit of the fused exact path

inline int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}
inline int round_up(int a, int b) {
  return ceil_div(a, b) * b;
}

// A microkernel updates one full MR x NR tile of C:
//   acc = load ? C : 0;  for k < kb: acc(i,j) = fma(Ap[k][i], Bp[k][j], acc(i,j));
//   if E: acc(i,j) = acc(i,j) + E[i*lde + j];  C = acc.
// Ap is an MR-interleaved panel of A, Bp an NR-interleaved panel of B (both zero-padded).
template <class T>
using Microkernel = void (*)(int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
                             std::ptrdiff_t lde);

template <class T>
void ukernel_scalar(int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
                    std::ptrdiff_t lde) {
  constexpr int kMR = Tile<T>::MR, NR = Tile<T>::NR;
  T acc[kMR][NR];
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = load ? C[i * ldc + j] : T(0);
  for (int k = 0; k < kb; ++k) {
    const T* a = Ap + k * kMR;
    const T* b = Bp + k * NR;
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = fma_exact(a[i], b[j], acc[i][j]);
  }
  if (E)
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = acc[i][j] + E[i * lde + j];
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < NR; ++j) C[i * ldc + j] = acc[i][j];
}

#if defined(MINIPIPE_GEMM_AVX512) || defined(MINIPIPE_GEMM_AVX2)
// _mm512_fmadd_* / _mm256_fmadd_* round once, exactly like fmaf/fma, so the vector lanes
// reproduce the scalar microkernel bit for bit; the k loop stays sequential per lane.
#ifdef MINIPIPE_GEMM_AVX512
struct SimdFloat {
  using V = __m512;
  static constexpr int W = 16;
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V zero() { return _mm512_setzero_ps(); }
};
struct SimdDouble {
  using V = __m512d;
  static constexpr int W = 8;
  static V load(const double* p) { return _mm512_load_pd(p); }
  static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V bcast(const double* p) { return _mm512_set1_pd(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V zero() { return _mm512_setzero_pd(); }
};
#else
struct SimdFloat {
  using V = __m256;
  static constexpr int W = 8;
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V zero() { return _mm256_setzero_ps(); }
};
struct SimdDouble {
  using V = __m256d;
  static constexpr int W = 4;
  static V load(const double* p) { return _mm256_load_pd(p); }
  static V loadu(const double* p) { return _mm256_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V zero() { return _mm256_setzero_pd(); }
};
#endif

// MR rows x 2 vectors of accumulators. The row loops have constant trip counts and are fully
// unrolled, so the compiler keeps every accumulator in a register (the AVX-512 tile uses 27 of
// the 32 zmm registers; checked in the disassembly: no spills in the k loop). ROWS < MR computes
// only the first ROWS rows of the tile (the panel's stride stays MR): an edge tile with fewer rows.
// kNext: each k step also asks for the k-th row of the B panel at next (the panel after Bp, kb x
// NR) in L2, so that a tile streams in the next panel while it computes (see gemm_packed).
template <class S, class T, int ROWS = Tile<T>::MR, bool kNext = false>
void ukernel_simd_next(int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
                       std::ptrdiff_t lde, const T* next) {
  using V = typename S::V;
  constexpr int W = S::W, MR = Tile<T>::MR;
  static_assert(2 * W == Tile<T>::NR, "register tile is two vectors wide");
  static_assert(ROWS >= 1 && ROWS <= MR, "rows of a tile");
  V ca[ROWS], cb[ROWS];
  if (load) {
    MINIPIPE_HOST_UNROLL(16)
    for (int i = 0; i < ROWS; ++i) {
      ca[i] = S::loadu(C + i * ldc);
      cb[i] = S::loadu(C + i * ldc + W);
    }
  } else {
    MINIPIPE_HOST_UNROLL(16)
    for (int i = 0; i < ROWS; ++i) ca[i] = cb[i] = S::zero();
  }
  MINIPIPE_HOST_UNROLL(2)
  for (int k = 0; k < kb; ++k) {
    if (kNext) {
      _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + W), _MM_HINT_T1);
      next += 2 * W;
    }
    const V b0 = S::load(Bp);
    const V b1 = S::load(Bp + W);
    MINIPIPE_HOST_UNROLL(16)
    for (int i = 0; i < ROWS; ++i) {
      const V a = S::bcast(Ap + i);
      ca[i] = S::fma(a, b0, ca[i]);
      cb[i] = S::fma(a, b1, cb[i]);
    }
    Ap += MR;
    Bp += 2 * W;
  }
  if (E) {
    MINIPIPE_HOST_UNROLL(16)
    for (int i = 0; i < ROWS; ++i) {
      ca[i] = S::add(ca[i], S::loadu(E + i * lde));
      cb[i] = S::add(cb[i], S::loadu(E + i * lde + W));
    }
  }
  MINIPIPE_HOST_UNROLL(16)
  for (int i = 0; i < ROWS; ++i) {
    S::storeu(C + i * ldc, ca[i]);
    S::storeu(C + i * ldc + W, cb[i]);
  }
}

template <class S, class T, int ROWS = Tile<T>::MR>
void ukernel_simd(int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
                  std::ptrdiff_t lde) {
  ukernel_simd_next<S, T, ROWS, false>(kb, Ap, Bp, C, ldc, load, E, lde, nullptr);
}

template <class T>
struct SimdOf;
template <>
struct SimdOf<float> {
  using type = SimdFloat;
};
template <>
struct SimdOf<double> {
  using type = SimdDouble;
};
#define MINIPIPE_GEMM_SIMD 1
#endif  // AVX-512 or AVX2

template <class T>
Microkernel<T> simd_microkernel() {
#ifdef MINIPIPE_GEMM_SIMD
  return &ukernel_simd<typename SimdOf<T>::type, T>;
#else
  return nullptr;
#endif
}

// A full tile of the SIMD microkernel that also streams in the next B panel (ukernel_simd_next);
// nullptr where there is no SIMD microkernel.
template <class T>
using NextPanelKernel = void (*)(int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
                                 std::ptrdiff_t lde, const T* next);
template <class T>
NextPanelKernel<T> next_panel_microkernel() {
#ifdef MINIPIPE_GEMM_SIMD
  return &ukernel_simd_next<typename SimdOf<T>::type, T, Tile<T>::MR, true>;
#else
  return nullptr;
#endif
}

#ifdef MINIPIPE_GEMM_SIMD
template <class T, int... R>
Microkernel<T> simd_rows_kernel(int rows, std::integer_sequence<int, R...>) {
  static constexpr Microkernel<T> kernels[] = {&ukernel_simd<typename SimdOf<T>::type, T, R + 1>...};
  return kernels[rows - 1];
}
#endif

// The microkernel for an edge tile of all NR columns and rows < MR rows, when uk is the SIMD one:
// its ROWS = rows variant, each element's chain the same; else nullptr.
template <class T>
Microkernel<T> edge_rows_kernel(Microkernel<T> uk, int rows) {
#ifdef MINIPIPE_GEMM_SIMD
  if (uk == simd_microkernel<T>()) return simd_rows_kernel<T>(rows, std::make_integer_sequence<int, Tile<T>::MR>{});
#endif
  (void)uk;
  (void)rows;
  return nullptr;
}

// Edge tiles (fewer than MR rows or NR columns left) run the same microkernel on a padded
// local copy, so the arithmetic of every valid element is unchanged; a tile short of rows only
// runs the SIMD microkernel's variant for its rows on C itself (at 128 rows, the last of 11 tiles
// of 12 rows had 8: a third of its work and the copies were wasted).
template <class T>
void run_tile(Microkernel<T> uk, int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
              std::ptrdiff_t lde, int mr, int nr) {
  constexpr int kMR = Tile<T>::MR, NR = Tile<T>::NR;
  if (mr == kMR && nr == NR) {
    uk(kb, Ap, Bp, C, ldc, load, E, lde);
    return;
  }
  if (nr == NR) {
    if (const Microkernel<T> rk = edge_rows_kernel(uk, mr)) {
      rk(kb, Ap, Bp, C, ldc, load, E, lde);
      return;
    }
  }
  alignas(64) T ct[kMR * NR];
  alignas(64) T et[kMR * NR];
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < NR; ++j) {
      const bool valid = i < mr && j < nr;
      ct[i * NR + j] = (load && valid) ? C[i * ldc + j] : T(0);
      if (E) et[i * NR + j] = valid ? E[i * lde + j] : T(0);
    }
  uk(kb, Ap, Bp, ct, NR, load, E ? et : nullptr, NR);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) C[i * ldc + j] = ct[i * NR + j];
}

// Asks for the C tile of the next microkernel call while this one runs: the tile is
// read (k-blocks after the first) or written at the ends of the call, and its rows lie ldc apart,
// which the hardware prefetcher does not follow.
template <class T>
inline void prefetch_tile(const T* C, std::ptrdiff_t ldc, int rows) {
#if defined(__GNUC__)
  constexpr int NR = Tile<T>::NR;
  for (int i = 0; i < rows; ++i) {
    __builtin_prefetch(C + i * ldc, 1);
    __builtin_prefetch(C + i * ldc + NR - 1, 1);
  }
#else
  (void)C;
  (void)ldc;
  (void)rows;
#endif
}

// Packs rows m0..m0+MR-1, columns k0..k0+kb-1 of A as dst[k*MR + i] (rows past M are zero).
template <class T>
void pack_a(const StridedMat<T>& A, int M, int m0, int k0, int kb, T* dst) {
  constexpr int kMR = Tile<T>::MR;
  const int mr = std::min(kMR, M - m0);
  if (A.cs == 1) {  // rows contiguous in k: stream each row
    int k = 0;
#ifdef MINIPIPE_GEMM_AVX512
    if constexpr (std::is_same<T, float>::value) {
      const float* src[16];  // rows past mr repeat row 0; transpose16 does not read them
      for (int i = 0; i < 16; ++i) src[i] = A.data + static_cast<std::ptrdiff_t>(m0 + (i < mr ? i : 0)) * A.rs + k0;
      for (; k + 16 <= kb; k += 16) {
        const float* at[16];
        for (int i = 0; i < 16; ++i) at[i] = src[i] + k;
        host_simd::transpose16(at, mr, dst + static_cast<std::ptrdiff_t>(k) * kMR, kMR);
      }
    }
#endif
    for (int i = 0; i < mr; ++i) {
      const T* src = A.data + static_cast<std::ptrdiff_t>(m0 + i) * A.rs + k0;
      for (int kk = k; kk < kb; ++kk) dst[kk * kMR + i] = src[kk];
    }
  } else {  // columns contiguous (A is a transpose): read MR neighbours per k
#ifdef MINIPIPE_GEMM_AVX512
    if constexpr (std::is_same<T, float>::value && kMR <= 16) {
      if (A.rs == 1) {  // the MR neighbours are contiguous: one masked load and store per k, zeros past mr
        const __mmask16 valid = static_cast<__mmask16>((1u << mr) - 1u), row = static_cast<__mmask16>((1u << kMR) - 1u);
        const float* src = A.data + static_cast<std::ptrdiff_t>(k0) * A.cs + m0;
        for (int k = 0; k < kb; ++k)
          _mm512_mask_storeu_ps(dst + k * kMR, row,
                                _mm512_maskz_loadu_ps(valid, src + static_cast<std::ptrdiff_t>(k) * A.cs));
        return;
      }
    }
#endif
    for (int k = 0; k < kb; ++k) {
      const T* src = A.data + static_cast<std::ptrdiff_t>(k0 + k) * A.cs + static_cast<std::ptrdiff_t>(m0) * A.rs;
      for (int i = 0; i < mr; ++i) dst[k * kMR + i] = src[i * A.rs];
    }
  }
  for (int i = mr; i < kMR; ++i)
    for (int k = 0; k < kb; ++k) dst[k * kMR + i] = T(0);
}

// Packs rows k0..k0+kb-1, columns n0..n0+NR-1 of B as dst[k*NR + j] (columns past N are zero).
template <class T>
void pack_b(const StridedMat<T>& B, int N, int n0, int k0, int kb, T* dst) {
  constexpr int NR = Tile<T>::NR;
  const int nr = std::min(NR, N - n0);
  if (B.cs == 1) {  // rows of B contiguous in n
    for (int k = 0; k < kb; ++k) {
      const T* src = B.data + static_cast<std::ptrdiff_t>(k0 + k) * B.rs + n0;
      T* d = dst + k * NR;
      for (int j = 0; j < nr; ++j) d[j] = src[j];
      for (int j = nr; j < NR; ++j) d[j] = T(0);
    }
  } else {  // B is a transpose (e.g. W^T): each column is contiguous in k
    const T* src[NR];
    for (int j = 0; j < NR; ++j)
      src[j] = B.data + static_cast<std::ptrdiff_t>(n0 + std::min(j, nr - 1)) * B.cs +
               static_cast<std::ptrdiff_t>(k0) * B.rs;
    const std::ptrdiff_t rs = B.rs;
    int k = 0;
#ifdef MINIPIPE_GEMM_AVX512
    if constexpr (std::is_same<T, float>::value && NR == 32) {
      if (rs == 1 && nr == NR)  // whole panels: two 16-column transposes per 16 values of k
        for (; k + 16 <= kb; k += 16) {
          const float* lo[16];
          const float* hi[16];
          for (int j = 0; j < 16; ++j) {
            lo[j] = src[j] + k;
            hi[j] = src[16 + j] + k;
          }
          host_simd::transpose16(lo, 16, dst + static_cast<std::ptrdiff_t>(k) * NR, NR);
          host_simd::transpose16(hi, 16, dst + static_cast<std::ptrdiff_t>(k) * NR + 16, NR);
        }
    }
#endif
    for (; k < kb; ++k) {
      T* d = dst + k * NR;
      for (int j = 0; j < NR; ++j) d[j] = src[j][k * rs];
      for (int j = nr; j < NR; ++j) d[j] = T(0);
    }
  }
}

// r[i] = r[i] + A(m0 + i, k) for k = 0..kb-1 in order, read from A's packed panel of kMR rows
// (dst of pack_a) while it is in L1: the rows' sums that a backward-weight's bias needs.
template <class T>
void panel_row_chains(const T* pa, int kb, T* r) {
  constexpr int kMR = Tile<T>::MR;
  for (int k = 0; k < kb; ++k)
    for (int i = 0; i < kMR; ++i) r[i] = r[i] + pa[k * kMR + i];
}

// The k-block for depth K under the chosen KC: K split into equal blocks of at most kc_max (a
// multiple of 16 where that keeps the block count), so no call ends on a short remainder block.
inline int balanced_kc(int K, int kc_max) {
  if (K <= kc_max) return std::max(K, 1);
  const int per = ceil_div(K, ceil_div(K, kc_max));
  return std::min(kc_max, round_up(per, 16));
}

// Host path. Loop nest (BLIS order): jc (NC columns) > pc (KC depth, sequential, so each acc
// continues in C in k order) > ic (chunk of rows) > parallel units of MC rows x kUnitCols columns
// > jr (B micro-panel in L1) > ir (A micro-panels from L2). Threads only split (ic, jr) tiles;
// no element is ever split across threads, so the thread count cannot change any bit.
template <class T>
void gemm_packed(KernelWorkspace& ws, Microkernel<T> uk, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A,
                 StridedMat<T> B, T* C, std::ptrdiff_t ldc, const T* bias, GemmOut out, PackedB<T>* packed,
                 T* row_sums) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Policy = Kokkos::RangePolicy<Host>;
  constexpr int kMR = Tile<T>::MR, NR = Tile<T>::NR;
  const GemmBlocks& blk = blocks_of<T>();
  const int kc = opt.kc > 0 ? opt.kc : balanced_kc(K, blk.kc);
  const int mc = round_up(opt.mc > 0 ? opt.mc : blk.mc, kMR);
  const int nc = round_up(opt.nc > 0 ? opt.nc : blk.nc, NR);
  const int mchunk = mc * kChunkBlocks;
  const int mq = mc / kMR;  // A micro-panels per unit, at most
  const int threads = std::max(1, Host().concurrency());
  const int unit_panels = std::max(1, kUnitCols / NR);

  T* Ap = ws.get<T>(KernelWorkspace::gemm_a,
                    static_cast<std::size_t>(std::min(kc, K)) * round_up(std::min(mchunk, M), kMR));
  // B's panels: per (jc, pc) block into the workspace, or all blocks once into a kept copy, block
  // (jc, pc) at offset jc K + round_up(nb, NR) pc (every block before jc is nc wide, nc % NR = 0).
  const bool keep = packed && packed->on;
  T* Bp = nullptr;
  bool pack_now = true;
  if (keep) {
    const std::size_t total =
        static_cast<std::size_t>(N / nc) * nc * K + static_cast<std::size_t>(round_up(N % nc, NR)) * K;
    const bool same = packed->valid && packed->src == B.data && packed->rs == B.rs && packed->cs == B.cs &&
                      packed->n == N && packed->k == K && packed->kc == kc && packed->nc == nc;
    if (!same) {
      if (packed->panels.extent(0) < total) packed->panels = View1<T>("gemm_packed_b", total);
      packed->valid = true;
      packed->src = B.data;
      packed->rs = B.rs;
      packed->cs = B.cs;
      packed->n = N;
      packed->k = K;
      packed->kc = kc;
      packed->nc = nc;
    }
    pack_now = !same;
  } else {
    Bp = ws.get<T>(KernelWorkspace::gemm_b, static_cast<std::size_t>(std::min(kc, K)) * round_up(std::min(nc, N), NR));
  }

  // Kept panels come from memory once per call (25 MB for the e2e deck's eight layers): a unit's
  // last full tile on panel p streams panel p + 1 into L2 as it runs, where the next tiles would
  // otherwise find it in memory. 128-row calls (a micro-batch at m = 8) read each panel for only 11
  // tiles; `gemm_f32/kept_fwd` and `kept_bwd_input` there ran 1.03x faster with it (7 rounds;
  // level at 1024 rows). Asking for the whole panel at each panel's start instead (512 requests at
  // once) made m = 8 steps 3% slower than asking for nothing.
  const NextPanelKernel<T> uk_next = keep && uk == simd_microkernel<T>() ? next_panel_microkernel<T>() : nullptr;

  // Epilogue addend E (row stride lde): the bias row (lde = 0) or the old C. With several
  // k-blocks C holds the running acc, so accumulate mode first saves the old C.
  const T* E = nullptr;
  std::ptrdiff_t lde = 0;
  const bool chain_c = out == GemmOut::chain_on_c;  // the first k-block loads C: no addend
  if (out == GemmOut::accumulate) {
    if (K > kc) {
      T* saved = ws.get<T>(KernelWorkspace::gemm_c, static_cast<std::size_t>(M) * N);
      Kokkos::parallel_for("Gemm::save_c", Policy(0, M), [=](const int m) {
        for (int n = 0; n < N; ++n) saved[static_cast<std::ptrdiff_t>(m) * N + n] = C[m * ldc + n];
      });
      E = saved;
      lde = N;
    } else {
      E = C;  // read element by element before the same element is stored
      lde = ldc;
    }
  } else if (bias) {
    E = bias;
  }

  // Row sums of A (row_sums): chains r(m) over k in order, continued from k-block to k-block in
  // the panels A is packed into for the first column block.
  T* const rsum = row_sums ? ws.get<T>(KernelWorkspace::dw_row_sums, static_cast<std::size_t>(M)) : nullptr;
  if (rsum) std::fill(rsum, rsum + M, T(0));

  for (int jc = 0; jc < N; jc += nc) {
    const int nb = std::min(nc, N - jc);
    const int npan = ceil_div(nb, NR);
    T* const rs = jc == 0 ? rsum : nullptr;
    for (int pc = 0; pc < K; pc += kc) {
      const int kb = std::min(kc, K - pc);
      const bool first = pc == 0 && !chain_c;  // the tiles start from 0, not from C
      const bool last = pc + kb == K;
      T* const Bb = keep ? packed->panels.data() + static_cast<std::ptrdiff_t>(jc) * K +
                               static_cast<std::ptrdiff_t>(npan) * NR * pc
                         : Bp;
      if (pack_now)
        Kokkos::parallel_for("Gemm::pack_b", Policy(0, npan), [=](const int p) {
          pack_b(B, N, jc + p * NR, pc, kb, Bb + static_cast<std::ptrdiff_t>(p) * kb * NR);
        });
      for (int ic = 0; ic < M; ic += mchunk) {
        const int mb = std::min(mchunk, M - ic);
        const int mpan = ceil_div(mb, kMR);
        Kokkos::parallel_for("Gemm::pack_a", Policy(0, mpan), [=](const int q) {
          T* const pa = Ap + static_cast<std::ptrdiff_t>(q) * kb * kMR;
          pack_a(A, M, ic + q * kMR, pc, kb, pa);
          if (rs) {
            const int m0 = ic + q * kMR;
            T r[kMR];
            for (int i = 0; i < kMR; ++i) r[i] = i < M - m0 ? rs[m0 + i] : T(0);
            panel_row_chains(pa, kb, r);
            for (int i = 0; i < std::min(kMR, M - m0); ++i) rs[m0 + i] = r[i];
          }
        });
        // Row blocks of at most mq panels, as many as a multiple of the thread count, block ib the
        // panels [ib mpan / n_ib, (ib + 1) mpan / n_ib): sizes differ by one at most, so the static
        // split gives each thread the same work. (Blocks of mq with a short last one had left one
        // of 2 threads 25% more; blocks of ceil(mpan / n_ib) still 10% more at 1024 rows: 45 and 41
        // of 86 panels.)
        const int n_ib = threads * ceil_div(mpan, threads * mq);
        // Column blocks of at most unit_panels B panels, block jb the panels [jb npan / n_jb,
        // (jb + 1) npan / n_jb). Consecutive units share their A block (ib is the slow index) so it
        // stays in L2. But where each thread has one row block and B, packed by this call, is the
        // wider operand (a weight gradient of 256 outputs and 1024 inputs), each thread takes a
        // share of the column blocks instead (jb slow, a multiple of the thread count): it then
        // reads the B panels that it packed itself and the smaller A from the other cores, not
        // all of B (2 threads: 1.22x the GFLOP/s on that weight gradient).
        const bool cols = threads > 1 && !keep && n_ib == threads && nb > mb && npan >= 2 * threads;
        const int n_jb = cols ? threads * ceil_div(npan, threads * unit_panels) : ceil_div(npan, unit_panels);
        Kokkos::parallel_for("Gemm::tiles", Policy(0, n_ib * n_jb), [=](const int u) {
          const int ib = cols ? u % n_ib : u / n_jb;
          const int jb = cols ? u / n_ib : u % n_jb;
          const int q0 = static_cast<int>(std::int64_t(ib) * mpan / n_ib);
          const int q1 = static_cast<int>(std::int64_t(ib + 1) * mpan / n_ib);
          const int p0 = static_cast<int>(std::int64_t(jb) * npan / n_jb);
          const int p1 = static_cast<int>(std::int64_t(jb + 1) * npan / n_jb);
          // The tile that streams in the next panel (uk_next): the unit's last full one, where this
          // thread runs the next panel too (the same unit, or the next one on one thread).
          const int q_next = M - (ic + (q1 - 1) * kMR) >= kMR ? q1 - 1 : q1 - 2;
          for (int p = p0; p < p1; ++p) {
            const int n0 = jc + p * NR;
            const T* bp = Bb + static_cast<std::ptrdiff_t>(p) * kb * NR;
            const bool stream =
                uk_next && q_next >= q0 && N - n0 >= NR && (p + 1 < p1 || (threads == 1 && p + 1 < npan));
            for (int q = q0; q < q1; ++q) {
              const int m0 = ic + q * kMR;
              if (q + 1 < q1)
                prefetch_tile(C + (m0 + kMR) * ldc + n0, ldc, std::min(kMR, M - m0 - kMR));
              else if (p + 1 < p1)
                prefetch_tile(C + (ic + q0 * kMR) * ldc + n0 + NR, ldc, std::min(kMR, M - ic - q0 * kMR));
              const T* e = (last && E) ? E + m0 * lde + n0 : nullptr;
              const T* ap = Ap + static_cast<std::ptrdiff_t>(q) * kb * kMR;
              if (stream && q == q_next)
                uk_next(kb, ap, bp, C + m0 * ldc + n0, ldc, !first, e, lde, bp + static_cast<std::ptrdiff_t>(kb) * NR);
              else
                run_tile(uk, kb, ap, bp, C + m0 * ldc + n0, ldc, !first, e, lde, std::min(kMR, M - m0),
                         std::min(NR, N - n0));
            }
          }
        });
      }
    }
  }
  if (rsum) Kokkos::parallel_for("Gemm::row_sums_add", Policy(0, M), [=](const int m) { row_sums[m] += rsum[m]; });
  fence_host_threads(Host(), "Gemm::det packed");
}

// row_sums[m] += the chain r = 0; r = r + A(m,k) over k in order: one thread per row (on a GPU
// consecutive rows, consecutive addresses when A is a transpose such as dy^T).
template <class T>
void row_sums_generic(int M, int K, StridedMat<T> A, T* row_sums) {
  Kokkos::parallel_for(
      "Gemm::row_sums", Kokkos::RangePolicy<ExecSpace>(0, M), KOKKOS_LAMBDA(const int m) {
        T r = T(0);
        for (int k = 0; k < K; ++k) r = r + A.data[m * A.rs + k * A.cs];
        row_sums[m] += r;
      });
  fence_space(ExecSpace(), "Gemm::row_sums");
}

// ---- Exact accumulation of microkernel tiles (gemm_det_exact) ----------------------------
// The words of limb sums (ExactSum::float_limb) formed 16 values at a time; tile_to_limbs below
// says why one multiply and one float-to-int64 conversion give them.
#if defined(MINIPIPE_GEMM_AVX512) && defined(__AVX512DQ__)
#define MINIPIPE_GEMM_EXACT_LIMBS 1
constexpr int kLimbRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// The common case of 16 values v: every nonzero one lies in limb 1 (102 <= q < 134: 2^-25 <= |v|
// < 2^7; a zero adds 0 to any limb). Then the words are v 2^48, added to a1[0..15], and true is
// returned; else nothing is touched and false is returned.
inline bool vec16_to_limb1(__m512 v, std::int64_t* a1) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i q = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
  const __mmask16 nz = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 in1 =
      _mm512_mask_cmplt_epu32_mask(nz, _mm512_sub_epi32(q, _mm512_set1_epi32(102)), _mm512_set1_epi32(32));
  if (in1 != nz) return false;
  const __m512 x = _mm512_mul_ps(v, _mm512_set1_ps(281474976710656.0f));  // 2^(80 - 32), limb 1's scale
  const __m512i w0 = _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(x), kLimbRound);
  const __m512i w1 = _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(x, 1), kLimbRound);
  _mm512_store_si512(reinterpret_cast<void*>(a1), _mm512_add_epi64(_mm512_load_si512(a1), w0));
  _mm512_store_si512(reinterpret_cast<void*>(a1 + 8), _mm512_add_epi64(_mm512_load_si512(a1 + 8), w1));
  return true;
}

// The next most common case (the q and k columns of a qkv weight gradient hold many values below
// 2^-25): every value lies in limb 0 or limb 1 (q < 134). Then the words are v 2^80 (limb 0, with
// the rounding of vec16_to_limbs below 2^-57) and v 2^48 (limb 1), added to a0 or a1 under masks, no
// branch per lane; true is returned. Else nothing is touched and false is returned.
inline bool vec16_to_limb01(__m512 v, std::int64_t* a0, std::int64_t* a1) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i q = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
  if (_mm512_cmpge_epu32_mask(q, _mm512_set1_epi32(134)) != 0) return false;
  const __mmask16 in1 = _mm512_cmpge_epu32_mask(q, _mm512_set1_epi32(102));
  const __m512 x = _mm512_mul_ps(
      v, _mm512_mask_blend_ps(in1, _mm512_set1_ps(1208925819614629174706176.0f), _mm512_set1_ps(281474976710656.0f)));
  for (int h = 0; h < 2; ++h) {
    const __m512i w =
        _mm512_cvt_roundps_epi64(h == 0 ? _mm512_castps512_ps256(x) : _mm512_extractf32x8_ps(x, 1), kLimbRound);
    const __mmask8 m1 = static_cast<__mmask8>(in1 >> (8 * h));
    std::int64_t* const d0 = a0 + 8 * h;
    std::int64_t* const d1 = a1 + 8 * h;
    const __m512i c0 = _mm512_load_si512(reinterpret_cast<const void*>(d0));
    const __m512i c1 = _mm512_load_si512(reinterpret_cast<const void*>(d1));
    _mm512_store_si512(reinterpret_cast<void*>(d0), _mm512_mask_add_epi64(c0, static_cast<__mmask8>(~m1), c0, w));
    _mm512_store_si512(reinterpret_cast<void*>(d1), _mm512_mask_add_epi64(c1, m1, c1, w));
  }
  return true;
}

// Any 16 values v: each word is added to its own limb (limb[j] + 0..15); lanes that overflow
// (|v| >= 2^46 or not finite) add nothing and set their bit of bad.
inline void vec16_to_limbs(__m512 v, std::int64_t* const (&limb)[4], __mmask16& bad) {
  const __m512i c127 = _mm512_set1_epi32(127), c207 = _mm512_set1_epi32(207), c70 = _mm512_set1_epi32(70);
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i q = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
  const __mmask16 ok = _mm512_cmplt_epu32_mask(q, _mm512_set1_epi32(173));  // |v| < 2^46 and finite
  bad |= static_cast<__mmask16>(~ok);
  const __mmask16 pos = _mm512_cmpge_epu32_mask(q, c70);
  const __m512i j = _mm512_maskz_srli_epi32(pos, _mm512_and_si512(_mm512_sub_epi32(q, c70), c127), 5);
  // 2^(80 - 32 j): biased exponent 207 - 32 j.
  const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(c207, _mm512_slli_epi32(j, 5)), 23));
  const __m512 x = _mm512_mul_ps(v, scale);
  __mmask16 sel[4];
  for (int k = 0; k < 4; ++k) sel[k] = _mm512_mask_cmpeq_epi32_mask(ok, j, _mm512_set1_epi32(k));
  for (int h = 0; h < 2; ++h) {
    const __m512i w =
        _mm512_cvt_roundps_epi64(h == 0 ? _mm512_castps512_ps256(x) : _mm512_extractf32x8_ps(x, 1), kLimbRound);
    for (int k = 0; k < 4; ++k) {
      const __mmask8 s8 = static_cast<__mmask8>(sel[k] >> (8 * h));
      if (s8 == 0) continue;
      std::int64_t* const dst = limb[k] + 8 * h;
      const __m512i cur = _mm512_load_si512(reinterpret_cast<const void*>(dst));
      _mm512_store_si512(reinterpret_cast<void*>(dst), _mm512_mask_add_epi64(cur, s8, cur, w));
    }
  }
}
#endif

// Limbs of one tile: a_j[l] += the limb-j word of ct[l] (ExactSum::float_limb), bad |= overflow.
// The AVX-512 version forms the same words another way (tests compare it with ExactSum's scalar
// functions through the scalar GemmPath). A finite float with biased exponent q < 173 sits at limb
// j = (q - 70) / 32 (0 below q = 70), and its word is the integer v 2^(80 - 32 j): exact for
// q >= 70 (|v 2^(80 - 32 j)| < 2^55, an integer-valued float), and below 2^23 for q < 70, where
// it is the one rounding to nearest even that from_double's rint makes. So the word is one
// multiply by a power of two and a float-to-int64 conversion with that rounding (AVX512DQ).
template <int TS>
void tile_to_limbs(const float* ct, std::int64_t* a0, std::int64_t* a1, std::int64_t* a2, std::int64_t* a3,
                   std::int64_t& bad) {
#ifdef MINIPIPE_GEMM_EXACT_LIMBS
  static_assert(TS % 16 == 0, "whole vectors");
  __mmask16 bad_any = 0;
  for (int l = 0; l < TS; l += 16) {
    const __m512 v = _mm512_load_ps(ct + l);
    if (vec16_to_limb1(v, a1 + l) || vec16_to_limb01(v, a0 + l, a1 + l)) continue;
    std::int64_t* const limb[4] = {a0 + l, a1 + l, a2 + l, a3 + l};
    vec16_to_limbs(v, limb, bad_any);
  }
  bad |= bad_any != 0 ? 1 : 0;
#else
  alignas(64) std::int64_t b[TS] = {};
  ExactSum::limb_accumulate<TS>(ct, TS, a0, a1, a2, a3, b);
  for (int l = 0; l < TS; ++l) bad |= b[l];
#endif
}

#ifdef MINIPIPE_GEMM_EXACT_LIMBS
// The limbs of a tile of the fused exact path: a1 always, a0, a2 and a3 (`others`) only once a
// value outside limb 1 has appeared (zeroed then), so the common tile keeps 3 KB hot, not 12 KB.
struct TileLimbs {
  alignas(64) std::int64_t a0[Tile<float>::MR * Tile<float>::NR];
  alignas(64) std::int64_t a1[Tile<float>::MR * Tile<float>::NR];
  alignas(64) std::int64_t a2[Tile<float>::MR * Tile<float>::NR];
  alignas(64) std::int64_t a3[Tile<float>::MR * Tile<float>::NR];
  bool others = false;
  void clear() {
    for (std::int64_t& w : a1) w = 0;
    others = false;
  }
  void use_others() {
    if (others) return;
    for (int l = 0; l < Tile<float>::MR * Tile<float>::NR; ++l) a0[l] = a2[l] = a3[l] = 0;
    others = true;
  }
};

// The microkernel of the fused exact path: the FMA loop of ukernel_simd<SimdFloat, float> (the
// tile starts from 0 and runs the whole K: each element the same chain over k in order), which
// also asks for the next call's panels (pf_a: MR x kb, pf_b: kb x NR floats) to be brought to
// L1 while it runs; then each accumulator vector goes to limbs straight from its register (no
// float tile stored and read back).
void ukernel_exact_limbs(int kb, const float* Ap, const float* Bp, const float* pf_a, const float* pf_b, TileLimbs& t,
                         __mmask16& bad) {
  using S = SimdFloat;
  using V = S::V;
  constexpr int W = S::W, MR = Tile<float>::MR, NR = Tile<float>::NR;
  V ca[MR], cb[MR];
  MINIPIPE_HOST_UNROLL(16)
  for (int i = 0; i < MR; ++i) ca[i] = cb[i] = S::zero();
  MINIPIPE_HOST_UNROLL(2)
  for (int k = 0; k < kb; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(pf_b), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pf_b + W), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pf_a), _MM_HINT_T0);
    const V b0 = S::load(Bp);
    const V b1 = S::load(Bp + W);
    MINIPIPE_HOST_UNROLL(16)
    for (int i = 0; i < MR; ++i) {
      const V a = S::bcast(Ap + i);
      ca[i] = S::fma(a, b0, ca[i]);
      cb[i] = S::fma(a, b1, cb[i]);
    }
    Ap += MR;
    Bp += NR;
    pf_a += MR;
    pf_b += NR;
  }
  MINIPIPE_HOST_UNROLL(16)
  for (int i = 0; i < MR; ++i) {
    const bool fast = vec16_to_limb1(ca[i], t.a1 + i * NR);
    const bool fast_b = vec16_to_limb1(cb[i], t.a1 + i * NR + W);
    if (fast && fast_b) continue;
    t.use_others();
    if (!fast && !vec16_to_limb01(ca[i], t.a0 + i * NR, t.a1 + i * NR)) {
      std::int64_t* const limb[4] = {t.a0 + i * NR, t.a1 + i * NR, t.a2 + i * NR, t.a3 + i * NR};
      vec16_to_limbs(ca[i], limb, bad);
    }
    if (!fast_b && !vec16_to_limb01(cb[i], t.a0 + i * NR + W, t.a1 + i * NR + W)) {
      std::int64_t* const limb[4] = {t.a0 + i * NR + W, t.a1 + i * NR + W, t.a2 + i * NR + W, t.a3 + i * NR + W};
      vec16_to_limbs(cb[i], limb, bad);
    }
  }
}

// Rows of A (or B) are the packers' unit below; a row of dy at 1024 channels is one 4 KB page, which
// the hardware prefetchers do not cross, so each row began with a miss: the row kPackAhead ahead
// is asked for while one is copied.
constexpr int kPackAhead = 8;
inline void prefetch_run(const float* p, int n) {
  for (int i = 0; i < n; i += 16) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + n - 1), _MM_HINT_T0);
}

// One sample's A block (rows m0..m0+mb-1, all K) as the panels of pack_a (panel q at dst + q K MR,
// rows past mb zero), when A's rows are its contiguous index (A.rs == 1, A = dy^T): k outermost,
// so every k reads one contiguous run of mb values. pack_a's panel order read MR values a row of
// dy at the row stride (4 KB at 1024 channels): 48 bytes of every line, the lines of one panel in a
// few L1 sets. With r (the block's row sums), also r[m] = r[m] + A(m0 + m, k), k in order from
// r = 0: each row's chain of panel_row_chains, the same additions.
void pack_a_block_kmajor(const StridedMat<float>& A, int m0, int mb, int K, float* dst, float* r) {
  constexpr int MR = Tile<float>::MR;
  static_assert(MR <= 16, "one masked vector per panel row");
  const int mpan = ceil_div(mb, MR);
  const __mmask16 row = static_cast<__mmask16>((1u << MR) - 1u);
  const __mmask16 last = static_cast<__mmask16>((1u << (mb - (mpan - 1) * MR)) - 1u);
  const std::size_t panel = static_cast<std::size_t>(K) * MR;
  if (r) std::fill(r, r + mb, 0.0f);
  for (int k = 0; k < K; ++k) {
    const float* const src = A.data + static_cast<std::ptrdiff_t>(k) * A.cs + m0;
    float* const d = dst + static_cast<std::size_t>(k) * MR;
    if (k + kPackAhead < K) prefetch_run(src + kPackAhead * A.cs, mb);
    for (int q = 0; q < mpan; ++q)
      _mm512_mask_storeu_ps(d + q * panel, row, _mm512_maskz_loadu_ps(q + 1 < mpan ? row : last, src + q * MR));
    if (r)
      for (int m = 0; m < mb; ++m) r[m] = r[m] + src[m];
  }
}

// One sample's B block (columns n0..n0+nb-1, all K) as the panels of pack_b (panel p at dst + p K
// NR, columns past nb zero), when B's columns are contiguous (B.cs == 1): k outermost, as above.
void pack_b_block_kmajor(const StridedMat<float>& B, int n0, int nb, int K, float* dst) {
  constexpr int NR = Tile<float>::NR, W = 16;
  static_assert(NR == 2 * W, "two vectors per panel row");
  const int npan = ceil_div(nb, NR);
  const int tail = nb - (npan - 1) * NR;  // columns of the last panel
  const __mmask16 lo = static_cast<__mmask16>(tail >= W ? 0xFFFFu : (1u << tail) - 1u);
  const __mmask16 hi = static_cast<__mmask16>(tail > W ? (1u << (tail - W)) - 1u : 0u);
  const std::size_t panel = static_cast<std::size_t>(K) * NR;
  for (int k = 0; k < K; ++k) {
    const float* const src = B.data + static_cast<std::ptrdiff_t>(k) * B.rs + n0;
    float* const d = dst + static_cast<std::size_t>(k) * NR;
    if (k + kPackAhead < K) prefetch_run(src + kPackAhead * B.rs, nb);
    int p = 0;
    for (; p + 1 < npan; ++p) {
      _mm512_store_ps(d + p * panel, _mm512_loadu_ps(src + p * NR));
      _mm512_store_ps(d + p * panel + W, _mm512_loadu_ps(src + p * NR + W));
    }
    _mm512_store_ps(d + p * panel, _mm512_maskz_loadu_ps(lo, src + p * NR));
    _mm512_store_ps(d + p * panel + W, _mm512_maskz_loadu_ps(hi, src + p * NR + W));
  }
}
#endif

// acc[j] += limbs j (j < n) exactly: ExactSum::fold_limbs per element; the AVX-512 version folds
// 8 contiguous accumulators at a time (lo and hi words deinterleaved, the same integer steps).
// kZero: the accumulators are known to be zero, so they are stored without being read (the same
// integer steps from 0: same bits and the same overflow rule). fout: each sum's float is stored
// there too; with words false only the floats are (the AVX-512 loop; a scalar tail stores both).
template <bool kZero>
void fold_row(Fixed128* acc, const std::int64_t* a0, const std::int64_t* a1, const std::int64_t* a2,
              const std::int64_t* a3, int n, std::int64_t& ov, float* fout = nullptr, bool words = true) {
  int j = 0;
  (void)words;  // the scalar path below stores every word
#ifdef MINIPIPE_GEMM_AVX512
  static_assert(sizeof(Fixed128) == 16, "lo, hi");
  const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
  const __m512i inter_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                inter_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFF), one = _mm512_set1_epi64(1);
  __mmask8 ovm = 0;
  for (; j + 8 <= n; j += 8) {
    auto* p = reinterpret_cast<std::int64_t*>(acc + j);
    const __m512i v0 = kZero ? _mm512_setzero_si512() : _mm512_loadu_si512(p);
    const __m512i v1 = kZero ? _mm512_setzero_si512() : _mm512_loadu_si512(p + 8);
    const __m512i lo = _mm512_permutex2var_epi64(v0, even, v1);
    const __m512i hi = _mm512_permutex2var_epi64(v0, odd, v1);
    __m512i l0 = _mm512_loadu_si512(a0 + j), l1 = _mm512_loadu_si512(a1 + j), l2 = _mm512_loadu_si512(a2 + j),
            l3 = _mm512_loadu_si512(a3 + j);
    l1 = _mm512_add_epi64(l1, _mm512_srai_epi64(l0, 32));
    l0 = _mm512_and_si512(l0, low32);
    l2 = _mm512_add_epi64(l2, _mm512_srai_epi64(l1, 32));
    l1 = _mm512_and_si512(l1, low32);
    l3 = _mm512_add_epi64(l3, _mm512_srai_epi64(l2, 32));
    l2 = _mm512_and_si512(l2, low32);
    const __m512i s0 = _mm512_or_si512(l0, _mm512_slli_epi64(l1, 32));
    const __m512i s1 = _mm512_or_si512(l2, _mm512_slli_epi64(l3, 32));
    const __m512i s2 = _mm512_srai_epi64(l3, 32);
    const __m512i r0 = _mm512_add_epi64(lo, s0);
    const __mmask8 c0 = _mm512_cmplt_epu64_mask(r0, s0);
    const __m512i t = _mm512_add_epi64(hi, s1);
    const __mmask8 c1 = _mm512_cmplt_epu64_mask(t, s1);
    const __m512i r1 = _mm512_mask_add_epi64(t, c0, t, one);
    const __mmask8 c2 = _mm512_cmplt_epu64_mask(r1, t);
    __m512i r2 = _mm512_add_epi64(_mm512_srai_epi64(hi, 63), s2);
    r2 = _mm512_mask_add_epi64(r2, c1, r2, one);
    r2 = _mm512_mask_add_epi64(r2, c2, r2, one);
    ovm |= _mm512_cmpneq_epi64_mask(r2, _mm512_srai_epi64(r1, 63));
    const __m512i w0 = _mm512_permutex2var_epi64(r0, inter_lo, r1), w1 = _mm512_permutex2var_epi64(r0, inter_hi, r1);
    if (!words) {
      // ExactTarget::floats_only: nothing reads these sums again; the floats below stand for them.
    } else if (kZero && (reinterpret_cast<std::uintptr_t>(p) & 63) == 0) {
      // A first fold's sums are not read again before the whole output block is folded (by a
      // later group, or by the step's finalize): streamed to memory, they do not fetch the lines
      // they overwrite (the caller fences).
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), w0);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p + 8), w1);
    } else {
      _mm512_storeu_si512(p, w0);
      _mm512_storeu_si512(p + 8, w1);
    }
    // ExactSum::to_double, then to float: the same operations, 8 sums at a time (the scalar
    // to_double per sum, from the registers, made the deterministic step 1.09x slower).
    if (fout) {
#ifdef __AVX512DQ__
      const __m512i m = _mm512_srai_epi64(r1, 63), m1 = _mm512_and_si512(m, one), hm = _mm512_xor_si512(r1, m);
      const __m512i lo_mag = _mm512_add_epi64(_mm512_xor_si512(r0, m), m1);
      const __mmask8 lo_zero = _mm512_cmpeq_epi64_mask(lo_mag, _mm512_setzero_si512());
      const __m512i hi_mag = _mm512_mask_add_epi64(hm, lo_zero, hm, m1);
      const __m512d mag =
          _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepu64_pd(hi_mag), _mm512_set1_pd(18446744073709551616.0)),
                        _mm512_cvtepu64_pd(lo_mag));
      const __m512d v = _mm512_mask_xor_pd(mag, _mm512_test_epi64_mask(m, m), mag, _mm512_set1_pd(-0.0));
      const __m256 f = _mm512_cvtpd_ps(_mm512_mul_pd(v, _mm512_set1_pd(8.271806125530277e-25)));
      if ((reinterpret_cast<std::uintptr_t>(fout + j) & 31) == 0)
        _mm256_stream_ps(fout + j, f);  // read next by the optimizer, at the end of the step
      else
        _mm256_storeu_ps(fout + j, f);
#else
      alignas(64) Fixed128 sums[8];  // from the registers: the streamed words are not read back
      _mm512_store_si512(reinterpret_cast<__m512i*>(sums), w0);
      _mm512_store_si512(reinterpret_cast<__m512i*>(sums + 4), w1);
      for (int e = 0; e < 8; ++e) fout[j + e] = static_cast<float>(ExactSum::to_double(sums[e]));
#endif
    }
  }
  ov |= ovm != 0 ? 1 : 0;
#endif
  for (; j < n; ++j) {
    if (kZero) acc[j] = Fixed128{};
    ExactSum::fold_limbs(acc[j], a0[j], a1[j], a2[j], a3[j], ov);
    if (fout) fout[j] = static_cast<float>(ExactSum::to_double(acc[j]));
  }
}

// Fused exact accumulation (gemm_det_exact). Loop nest: jc (NC columns of the output) > sample
// groups of g (packed B of the group's samples for these columns) > ic (MC rows: packed A of the
// group) > parallel units (one B micro-panel x kUnitPanelsA A micro-panels) > ir > samples (the
// AVX-512 path: samples > ir, limbs formed from the registers). Every microkernel call runs the
// whole K of one sample (one k-block: the chain starts from 0 and is
// complete when the tile leaves the registers), the tile goes to limbs while in L1, and after the
// group the limbs of each element are folded into its accumulator. The group size only decides
// where folds happen, and folding is exact integer addition, so it changes no bit.
inline std::size_t exact_group_tuned(int K, int mc) {
  const std::size_t a_block = static_cast<std::size_t>(std::max(K, 1)) * mc * sizeof(float);
  return std::max<std::size_t>(1, gemm_blocking().exact_budget / a_block);
}

bool gemm_exact_packed(KernelWorkspace& ws, Microkernel<float> uk, const GemmOptions& opt, int M, int N, int K, int S,
                       StridedMat<float> A, std::ptrdiff_t a_step, StridedMat<float> B, std::ptrdiff_t b_step,
                       const ExactTarget& target, const ExactTarget* row_target) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Policy = Kokkos::RangePolicy<Host>;
  constexpr int kMR = Tile<float>::MR, NR = Tile<float>::NR, TS = kMR * NR;
  const int mc = round_up(opt.mc > 0 ? opt.mc : gemm_blocking().exact_mc, kMR);
  const int nc = round_up(opt.nc > 0 ? opt.nc : gemm_blocking().exact_nc, NR);
  // The A of a group (g samples x MC rows x K) is re-read for every B panel and should stay in L2;
  // at most kMaxLimbAdds samples are summed in int64 limbs before a fold.
  const std::size_t g_tuned = opt.group > 0 ? static_cast<std::size_t>(opt.group) : exact_group_tuned(K, mc);
  const int g = static_cast<int>(
      std::min<std::size_t>({static_cast<std::size_t>(S), static_cast<std::size_t>(ExactSum::kMaxLimbAdds), g_tuned}));
  const int mrows = round_up(std::min(mc, M), kMR);
  const int ncols = round_up(std::min(nc, N), NR);
  const std::size_t a_sample = static_cast<std::size_t>(K) * mrows;  // packed A floats per sample
  const std::size_t b_sample = static_cast<std::size_t>(K) * ncols;
  float* Ap = ws.get<float>(KernelWorkspace::dw_a, static_cast<std::size_t>(g) * a_sample);
  float* Bp = ws.get<float>(KernelWorkspace::dw_b, static_cast<std::size_t>(g) * b_sample);
  Fixed128* const acc = target.exact.data();
  const FlagView flag = target.overflow;
  // One group on accumulators known to be zero: its fold forms each element's whole sum, so it can
  // also store the float that GradAccum::finalize would convert it to.
  float* const fin = target.final_floats && target.known_zero && g >= S ? target.final_floats : nullptr;
  const bool words = !(fin && target.floats_only);
#ifdef MINIPIPE_GEMM_EXACT_LIMBS
  const bool fused = uk == simd_microkernel<float>();
#endif
  // Row sums of a group's samples (row_target): r[s * M + m], formed while A is packed.
  float* const rows_all =
      row_target ? ws.get<float>(KernelWorkspace::dw_row_sums, static_cast<std::size_t>(g) * M) : nullptr;

  for (int jc = 0; jc < N; jc += nc) {
    const int nb = std::min(nc, N - jc);
    const int npan = ceil_div(nb, NR);
    for (int s0 = 0; s0 < S; s0 += g) {
      const int gs = std::min(g, S - s0);
      float* const rsum = jc == 0 ? rows_all : nullptr;  // A is packed once per column block: sum once
      const bool first_fold = target.known_zero && s0 == 0;
#ifdef MINIPIPE_GEMM_EXACT_LIMBS
      if (fused && B.cs == 1)
        Kokkos::parallel_for("Gemm::exact_pack_b", Policy(0, gs), [=](const int s) {
          const StridedMat<float> Bs{B.data + static_cast<std::ptrdiff_t>(s0 + s) * b_step, B.rs, B.cs};
          pack_b_block_kmajor(Bs, jc, nb, K, Bp + s * b_sample);
        });
      else
#endif
        Kokkos::parallel_for("Gemm::exact_pack_b", Policy(0, gs * npan), [=](const int u) {
          const int s = u / npan, p = u % npan;
          const StridedMat<float> Bs{B.data + static_cast<std::ptrdiff_t>(s0 + s) * b_step, B.rs, B.cs};
          pack_b(Bs, N, jc + p * NR, 0, K, Bp + s * b_sample + static_cast<std::size_t>(p) * K * NR);
        });
      for (int ic = 0; ic < M; ic += mc) {
        const int mb = std::min(mc, M - ic);
        const int mpan = ceil_div(mb, kMR);
#ifdef MINIPIPE_GEMM_EXACT_LIMBS
        if (fused && A.rs == 1)
          Kokkos::parallel_for("Gemm::exact_pack_a", Policy(0, gs), [=](const int s) {
            const StridedMat<float> As{A.data + static_cast<std::ptrdiff_t>(s0 + s) * a_step, A.rs, A.cs};
            pack_a_block_kmajor(As, ic, mb, K, Ap + s * a_sample,
                                rsum ? rsum + static_cast<std::size_t>(s) * M + ic : nullptr);
          });
        else
#endif
          Kokkos::parallel_for("Gemm::exact_pack_a", Policy(0, gs * mpan), [=](const int u) {
            const int s = u / mpan, q = u % mpan;
            const StridedMat<float> As{A.data + static_cast<std::ptrdiff_t>(s0 + s) * a_step, A.rs, A.cs};
            float* const pa = Ap + s * a_sample + static_cast<std::size_t>(q) * K * kMR;
            pack_a(As, M, ic + q * kMR, 0, K, pa);
            if (rsum) {  // this sample's chains over k, in order, from the panel in L1
              float r[kMR] = {};
              panel_row_chains(pa, K, r);
              const int m0 = ic + q * kMR;
              for (int i = 0; i < std::min(kMR, M - m0); ++i) rsum[static_cast<std::size_t>(s) * M + m0 + i] = r[i];
            }
          });
        // Units of one B panel x kUnitPanelsA A panels, the A panels fastest: a unit's B panels (g
        // samples) stay in L1/L2 while the block's A (g samples x MC rows) is read from L2.
        const int n_qb = ceil_div(mpan, kUnitPanelsA);
#ifdef MINIPIPE_GEMM_EXACT_LIMBS
        if (fused) {
          // The same units, samples and folds; the microkernel forms the limbs from its registers and
          // fetches the next call's panels, and the accumulators of a tile are asked for while its
          // last sample runs (the fold then finds them in cache).
          Kokkos::parallel_for("Gemm::exact_tiles", Policy(0, npan * n_qb), [=](const int u) {
            alignas(64) static const std::int64_t zero_limbs[NR] = {};
            TileLimbs t[kUnitPanelsA];
            __mmask16 bad = 0;
            std::int64_t ov = 0;
            const int p = u / n_qb;
            const int qa = (u % n_qb) * kUnitPanelsA, q1 = std::min(mpan, qa + kUnitPanelsA);
            const int n0 = jc + p * NR;
            const int nr = std::min(NR, N - n0);
            const auto a_panel = [=](int s, int q) {
              return Ap + s * a_sample + static_cast<std::size_t>(q) * K * kMR;
            };
            const auto b_panel = [=](int s) { return Bp + s * b_sample + static_cast<std::size_t>(p) * K * NR; };
            // Samples outer, the unit's A panels inner: a sample's B panel stays in L1 for its
            // kUnitPanelsA calls, beside the unit's limb-1 sums (3 KB a tile). The next sample's B
            // panel is fetched during the last call of this one.
            for (int q = qa; q < q1; ++q) t[q - qa].clear();
            for (int s = 0; s < gs; ++s) {
              const bool last_s = s + 1 == gs;
              for (int q = qa; q < q1; ++q) {
                const bool last_q = q + 1 == q1;
                const float* const pf_a = !last_q ? a_panel(s, q + 1) : a_panel(last_s ? s : s + 1, qa);
                const float* const pf_b = b_panel(!last_q || last_s ? s : s + 1);
                if (last_s && !first_fold) {
                  const int m0 = ic + q * kMR;
                  for (int i = 0; i < std::min(kMR, M - m0); ++i) {
                    const Fixed128* const row = acc + static_cast<std::ptrdiff_t>(m0 + i) * N + n0;
                    for (int j = 0; j < nr; j += 4) __builtin_prefetch(row + j, 1, 2);
                  }
                }
                ukernel_exact_limbs(K, a_panel(s, q), b_panel(s), pf_a, pf_b, t[q - qa], bad);
              }
            }
            for (int q = qa; q < q1; ++q) {
              const TileLimbs& tq = t[q - qa];
              const int m0 = ic + q * kMR;
              for (int i = 0; i < std::min(kMR, M - m0); ++i) {
                Fixed128* const row = acc + static_cast<std::ptrdiff_t>(m0 + i) * N + n0;
                const std::int64_t* const l0 = tq.others ? tq.a0 + i * NR : zero_limbs;
                const std::int64_t* const l2 = tq.others ? tq.a2 + i * NR : zero_limbs;
                const std::int64_t* const l3 = tq.others ? tq.a3 + i * NR : zero_limbs;
                if (first_fold)
                  fold_row<true>(row, l0, tq.a1 + i * NR, l2, l3, nr, ov,
                                 fin ? fin + static_cast<std::ptrdiff_t>(m0 + i) * N + n0 : nullptr, words);
                else
                  fold_row<false>(row, l0, tq.a1 + i * NR, l2, l3, nr, ov);
              }
            }
            if (first_fold) _mm_sfence();  // fold_row's streamed stores, before the threads' barrier
            if (ov || bad) flag() = 1;
          });
          continue;
        }
#endif
        Kokkos::parallel_for("Gemm::exact_tiles", Policy(0, npan * n_qb), [=](const int u) {
          alignas(64) float ct[TS];
          alignas(64) std::int64_t a0[TS], a1[TS], a2[TS], a3[TS];
          std::int64_t ov = 0;
          const int p = u / n_qb;
          const int q1 = std::min(mpan, (u % n_qb + 1) * kUnitPanelsA);
          const int n0 = jc + p * NR;
          const int nr = std::min(NR, N - n0);
          for (int q = (u % n_qb) * kUnitPanelsA; q < q1; ++q) {
            const int m0 = ic + q * kMR;
            const int mr = std::min(kMR, M - m0);
            for (int l = 0; l < TS; ++l) a0[l] = a1[l] = a2[l] = a3[l] = 0;
            for (int s = 0; s < gs; ++s) {
              uk(K, Ap + s * a_sample + static_cast<std::size_t>(q) * K * kMR,
                 Bp + s * b_sample + static_cast<std::size_t>(p) * K * NR, ct, NR, false, nullptr, 0);
              tile_to_limbs<TS>(ct, a0, a1, a2, a3, ov);
            }
            // Rows past M and columns past N hold zero partials of the padding: not folded. The
            // first group's fold into accumulators known to be zero stores without reading them.
            for (int i = 0; i < mr; ++i) {
              Fixed128* const row = acc + static_cast<std::ptrdiff_t>(m0 + i) * N + n0;
              if (first_fold)
                fold_row<true>(row, a0 + i * NR, a1 + i * NR, a2 + i * NR, a3 + i * NR, nr, ov,
                               fin ? fin + static_cast<std::ptrdiff_t>(m0 + i) * N + n0 : nullptr, words);
              else
                fold_row<false>(row, a0 + i * NR, a1 + i * NR, a2 + i * NR, a3 + i * NR, nr, ov);
            }
          }
#ifdef MINIPIPE_GEMM_AVX512
          if (first_fold) _mm_sfence();  // fold_row's streamed stores, before the threads' barrier
#endif
          if (ov) flag() = 1;
        });
      }
      if (rsum) {
        const ExactTarget rt = *row_target;
        Kokkos::parallel_for("Gemm::exact_row_sums", Policy(0, M), [=](const int m) {
          for (int s = 0; s < gs; ++s) rt.add(m, static_cast<double>(rsum[static_cast<std::size_t>(s) * M + m]));
        });
      }
    }
  }
  fence_host_threads(Host(), "Gemm::det exact");
  return fin != nullptr;
}

// Device path ("generic"): register-tiled team kernel, one team per BM x BN tile of C (and per
// sample of a batch). The team's threads form a TY x TX grid and thread (ty, tx) owns the RM x RN
// outputs at rows ty + r TY and columns tx + c TX of the tile, in registers for the whole of K
// (strided ownership: neighbouring threads read neighbouring scratch words and store neighbouring
// columns of C). A and B reach the threads through level-0 scratch in k-blocks of KT, double
// buffered: the team loads block k+1 (coalesced: consecutive threads read along whichever operand
// stride is 1) while it multiplies block k, one barrier per block. Every output is still the one
// sequential chain
//   acc = 0 (chain_on_c: C(m,n)); for k = 0..K-1: acc = fma_exact(A(m,k), B(k,n), acc)
// followed by the packed path's epilogue: identical bits by construction, whatever the tile shape
// (so the tile follows the team size: 16 x 16 threads on a GPU, one thread and one micro-tile per
// team on a host backend). With row sums the threads of column 0 of the first column tile also run
//   r = 0; for k = 0..K-1: r = r + A(m,k)
// on the A values they read anyway (the bias gradient beside a backward-weight).
template <class T>
struct DeviceTile {
  // 4 x 4 outputs a thread (64 x 64 a GPU team), float and double; k-blocks of 8. Within 128
  // registers (kMinTeamsPerSm) float's 8 x 8 spilled 612 B and 8 x 4 60 B (scripts/device_budgets.sh,
  // CUDA 13, sm_90; unbounded, 8 x 8 took 255 registers and still spilled 36 B). Every output is one
  // chain whatever the tile, so the tile moves no bit.
  static constexpr int RM = 4, RN = 4, KT = 8;
  static constexpr int kGpuTeam = 256;  // 16 x 16 threads
  // Teams an SM/CU must hold at once (Kokkos::LaunchBounds): nvcc then keeps a thread within
  // 65536 / (256 x 2) = 128 registers (25% occupancy), where unbounded float took 255 and double 130
  // (one team an SM: 12.5%). scripts/device_budgets.sh measures it.
  static constexpr int kMinTeamsPerSm = 2;
};

// The thread grid of a team of `team` threads (a power of two): TX = the smallest power of two
// with TX^2 >= team, TY = team / TX.
struct TeamGrid {
  int ty = 1, tx = 1;
  explicit TeamGrid(int team) {
    while (tx * tx < team) tx *= 2;
    ty = team / tx;
  }
};

// log2 of a power of two p >= 1.
inline int log2_exact(int p) {
  int l = 0;
  while ((p >> l) > 1) ++l;
  return l;
}

// Both buffers of both operands for a team of `team` threads.
template <class T>
std::size_t device_scratch_bytes(int team) {
  using D = DeviceTile<T>;
  const TeamGrid g(team);
  // the one carve of gemm_team: two k-blocks of A and B side by side
  return team::scratch_bytes<T>(2 * static_cast<std::size_t>(D::KT) * (g.ty * D::RM + g.tx * D::RN));
}

template <class T>
std::size_t device_scratch_bytes() {
  return device_scratch_bytes<T>(DeviceTile<T>::kGpuTeam);
}

// Threads per team: `requested` when given (tests run multi-thread teams on host backends), else
// one on a host backend and kGpuTeam on a GPU.
template <class T>
int device_team_size(int requested, team::Target target) {
  if (requested > 0) {
    if ((requested & (requested - 1)) != 0 || requested > DeviceTile<T>::kGpuTeam)
      throw std::invalid_argument("gemm_det: device team size " + std::to_string(requested) +
                                  " must be a power of two up to " + std::to_string(DeviceTile<T>::kGpuTeam));
    return requested;
  }
  return target == team::Target::host ? 1 : DeviceTile<T>::kGpuTeam;
}

// The launch shape of gemm_team on `target`: a team per (sample, BM x BN tile of C).
template <class T>
team::Shape gemm_shape(team::Target target, int team_request, int S, int M, int N) {
  const int team_size = device_team_size<T>(team_request, target);
  const TeamGrid grid(team_size);
  const int BM = grid.ty * DeviceTile<T>::RM, BN = grid.tx * DeviceTile<T>::RN;
  team::Shape s;
  s.league = S * ceil_div(M, BM) * ceil_div(N, BN);
  s.team = team_size;
  s.level = 0;
  s.scratch = device_scratch_bytes<T>(team_size);
  return s;
}

// Row sums of gemm_team: none, row_sums[m] += r (gemm_det_row_sums), or row_sums[s*step + m] = r
// (per-sample bias partials of the batched backward-weight).
enum class RowSums { none, add, store };

// The team body of gemm_team (one team: sample s, tile (m0, n0) of C_s).
template <class T>
struct GemmTeamBody {
  int M, N, K, TY, TX, tm, tn, nkb;
  int lbm, lbn;  // log2 of the tile's BM = TY RM and BN = TX RN (powers of two)
  StridedMat<T> A, B;
  std::ptrdiff_t a_step, b_step, c_step, ldc, rs_step;
  T* C;
  const T* bias;
  bool accumulate, chain_c, rs_on, rs_store;
  T* row_sums;

  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(const Member& tm_) const {
    using D = DeviceTile<T>;
    constexpr int RM = D::RM, RN = D::RN, KT = D::KT;
    // The grid and the switches formed per team (team::per_team): hoisted out of Kokkos' league
    // loop, their tests and products took the scalar registers of the last 4 SGPR spills on gfx90a.
    const int TY = team::per_team(this->TY), TX = team::per_team(this->TX);
    enum : int { kAcc = 1, kChain = 2, kSums = 4, kStore = 8, kBias = 16 };
    const int sw = team::per_team((accumulate ? kAcc : 0) | (chain_c ? kChain : 0) | (rs_on ? kSums : 0) |
                                  (rs_store ? kStore : 0) | (bias ? kBias : 0));
    const int BM = TY * RM, BN = TX * RN;
    const int lr = team::league(tm_);
    const int s = lr / (tm * tn);
    const int m0 = (lr / tn) % tm * BM;
    const int n0 = lr % tn * BN;
    const int mb = M - m0 < BM ? M - m0 : BM;
    const int nb = N - n0 < BN ? N - n0 : BN;
    const int ty = team::rank(tm_) / TX, tx = team::rank(tm_) % TX;
    const int pb = KT * (BM + BN);
    const auto buf = team::scratch<T>(tm_, 0, 2 * static_cast<std::size_t>(pb));  // 2 x [as (KT, BM), bs (KT, BN)]
    const T* a = A.data + s * a_step;
    const T* b = B.data + s * b_step;
    T* c = C + s * c_step;
    // Stages k-block kblk of A (k-major, as[k*BM + i]) and B (bs[k*BN + j]) in buffer kblk % 2;
    // entries outside the matrices are 0 and never enter a chain (the k loop stops at kb).
    // Element e of a k-block of A (KT x BM) and of B (KT x BN), k fastest where the operand is
    // contiguous in k, split by shifts (BM, BN and KT are powers of two): a division by the
    // run-time BM or BN kept its reciprocal in scalar registers (SGPR spills on gfx90a).
    constexpr int LKT = 3;
    static_assert(KT == 1 << LKT, "k-blocks split by shifts");
    const int a_si = A.cs == 1 ? LKT : 0, a_sk = A.cs == 1 ? 0 : lbm;
    const int b_sj = B.cs == 1 ? 0 : LKT, b_sk = B.cs == 1 ? lbn : 0;
    auto load = [&](const int kblk) {
      const auto as = buf + (kblk & 1) * pb;
      const auto bs = as + KT * BM;
      const int k0 = kblk * KT;
      const int kb = K - k0 < KT ? K - k0 : KT;
      team::threads(tm_, BM * KT, [&](const int e) {
        const int i = (e >> a_si) & (BM - 1);
        const int k = (e >> a_sk) & (KT - 1);
        as[k * BM + i] = (i < mb && k < kb) ? a[(m0 + i) * A.rs + (k0 + k) * A.cs] : T(0);
      });
      team::threads(tm_, KT * BN, [&](const int e) {
        const int j = (e >> b_sj) & (BN - 1);
        const int k = (e >> b_sk) & (KT - 1);
        bs[k * BN + j] = (j < nb && k < kb) ? b[(k0 + k) * B.rs + (n0 + j) * B.cs] : T(0);
      });
    };
    // gfx90a keeps a branch's lane mask in two of its 102 scalar registers, so the tile's edges are
    // handled without one branch per output: C_s is read at a clamped address and the value kept or
    // dropped (a branch an output cost 4 more SGPR spills, scripts/device_budgets.sh).
    T acc[RM][RN];
    for (int r = 0; r < RM; ++r)
      for (int q = 0; q < RN; ++q) acc[r][q] = T(0);
    if (sw & kChain)
      for (int r = 0; r < RM; ++r)
        for (int q = 0; q < RN; ++q) {
          const int i = ty + r * TY, j = tx + q * TX;
          const T v = c[(m0 + (i < mb ? i : mb - 1)) * ldc + n0 + (j < nb ? j : nb - 1)];
          acc[r][q] = i < mb && j < nb ? v : T(0);
        }
    const bool my_sums = (sw & kSums) && n0 == 0 && tx == 0;
    T rsum[RM];
    for (int r = 0; r < RM; ++r) rsum[r] = T(0);
    if (nkb > 0) load(0);
    team::barrier(tm_);
    for (int kblk = 0; kblk < nkb; ++kblk) {
      if (kblk + 1 < nkb) load(kblk + 1);
      const auto as = buf + (kblk & 1) * pb;
      const auto bs = as + KT * BM;
      const int kb = K - kblk * KT < KT ? K - kblk * KT : KT;
      for (int k = 0; k < kb; ++k) {
        T av[RM], bv[RN];
        for (int r = 0; r < RM; ++r) av[r] = as[k * BM + ty + r * TY];
        for (int q = 0; q < RN; ++q) bv[q] = bs[k * BN + tx + q * TX];
        for (int r = 0; r < RM; ++r)
          for (int q = 0; q < RN; ++q) acc[r][q] = fma_exact(av[r], bv[q], acc[r][q]);
        if (my_sums)
          for (int r = 0; r < RM; ++r) rsum[r] = rsum[r] + av[r];
      }
      team::barrier(tm_);  // block kblk's reads are done before block kblk + 2 overwrites them
    }
    // This thread's rows and columns inside the tile, counted afresh rather than compared again:
    // the compiler would otherwise keep the init's eight i < mb, j < nb wave masks alive across the
    // k loop, 16 scalar registers of gfx90a's 102. The loops keep their constant bounds: with
    // `r < rows` in the condition they were not unrolled and acc went to scratch memory.
    // The epilogue as one uniform int: tested as `bias` at each output, the pointer's non-null lane
    // mask stayed in two scalar registers across the k loop (2 of the last SGPR spills on gfx90a).
    const int mode = sw & kAcc ? 2 : sw & kBias ? 1 : 0;  // 2: C += acc, 1: C = acc + bias, 0: C = acc
    const int rows = mb > ty ? (mb - ty + TY - 1) / TY : 0;
    const int cols = nb > tx ? (nb - tx + TX - 1) / TX : 0;
    for (int r = 0; r < RM; ++r) {
      const int i = ty + r * TY;
      if (r >= rows) break;
      for (int q = 0; q < RN; ++q) {
        const int j = tx + q * TX;
        if (q >= cols) break;
        T* ce = c + (m0 + i) * ldc + n0 + j;
        if (mode == 2)
          *ce = *ce + acc[r][q];
        else if (mode == 1)
          *ce = acc[r][q] + bias[n0 + j];
        else
          *ce = acc[r][q];
      }
      if (my_sums) {
        if (sw & kStore)
          row_sums[s * rs_step + m0 + i] = rsum[r];
        else
          row_sums[m0 + i] += rsum[r];
      }
    }
  }
};

// S independent products C_s = A_s B_s (A_s = A advanced by s*a_step, likewise B_s and C_s) in one
// launch: the league is S x tiles of M x tiles of N.
template <class T>
void gemm_team(int S, int M, int N, int K, StridedMat<T> A, std::ptrdiff_t a_step, StridedMat<T> B,
               std::ptrdiff_t b_step, T* C, std::ptrdiff_t c_step, std::ptrdiff_t ldc, const T* bias, GemmOut out,
               int team_request = 0, RowSums rs_mode = RowSums::none, T* row_sums = nullptr,
               std::ptrdiff_t rs_step = 0) {
  using D = DeviceTile<T>;
  const team::Shape shape = gemm_shape<T>(team::launch_target(), team_request, S, M, N);
  const TeamGrid grid(shape.team);
  GemmTeamBody<T> body;
  body.M = M;
  body.N = N;
  body.K = K;
  body.TY = grid.ty;
  body.TX = grid.tx;
  body.tm = ceil_div(M, grid.ty * D::RM);
  body.tn = ceil_div(N, grid.tx * D::RN);
  body.nkb = ceil_div(K, D::KT);
  body.lbm = log2_exact(grid.ty * D::RM);
  body.lbn = log2_exact(grid.tx * D::RN);
  body.A = A;
  body.B = B;
  body.a_step = a_step;
  body.b_step = b_step;
  body.c_step = c_step;
  body.ldc = ldc;
  body.rs_step = rs_step;
  body.C = C;
  body.bias = bias;
  body.accumulate = out == GemmOut::accumulate;
  body.chain_c = out == GemmOut::chain_on_c;
  body.rs_on = rs_mode != RowSums::none;
  body.rs_store = rs_mode == RowSums::store;
  body.row_sums = row_sums;
  team::launch<D::kGpuTeam, D::kMinTeamsPerSm>("Gemm::det_device", shape, body);
}

}  // namespace gemm_detail

bool gemm_det_has_simd() {
#ifdef MINIPIPE_GEMM_SIMD
  return true;
#else
  return false;
#endif
}

std::string gemm_det_label() {
  return std::string("miniPipe gemm_det, ") + (use_device_path() ? "device path" : gemm_det_microkernel());
}

const char* gemm_det_microkernel() {
#if defined(MINIPIPE_GEMM_AVX512)
  return "AVX-512F 12x32 (float) / 12x16 (double)";
#elif defined(MINIPIPE_GEMM_AVX2)
  return "AVX2+FMA 6x16 (float) / 6x8 (double)";
#else
  return "scalar fma_exact 6x16 (float) / 6x8 (double)";
#endif
}

namespace {
constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

GemmPath resolve_path(GemmPath path, const char* where) {
  if (path == GemmPath::automatic)
    path =
        use_device_path() ? GemmPath::generic : (gemm_det_has_simd() ? GemmPath::packed_simd : GemmPath::packed_scalar);
  if (path != GemmPath::generic && !kHostAccessible)
    throw std::invalid_argument(std::string(where) + ": the packed path needs host-accessible memory");
  if (path == GemmPath::packed_simd && !gemm_det_has_simd())
    throw std::invalid_argument(std::string(where) + ": this build has no SIMD microkernel");
  return path;
}
}  // namespace

namespace {
template <class T>
void gemm_det_run(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A, StridedMat<T> B,
                  T* C, std::ptrdiff_t ldc, const T* bias, GemmOut out, PackedB<T>* packed, T* row_sums) {
  using namespace gemm_detail;
  if (M < 0 || N < 0 || K < 0)
    throw std::invalid_argument("gemm_det: negative shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                " K=" + std::to_string(K));
  if (out != GemmOut::overwrite && bias)
    throw std::invalid_argument(std::string("gemm_det: a bias cannot be combined with GemmOut::") +
                                (out == GemmOut::accumulate ? "accumulate" : "chain_on_c"));
  if (row_sums && K > 0 && !A.data) throw std::invalid_argument("gemm_det_row_sums: null operand");
  if (M == 0) return;
  if (N == 0) {  // no product, but the rows still have their sums
    if (row_sums && K > 0) row_sums_generic(M, K, A, row_sums);
    return;
  }
  if (M > 1 && ldc < N)
    throw std::invalid_argument("gemm_det: ldc=" + std::to_string(ldc) + " is smaller than N=" + std::to_string(N));
  if (!C || (K > 0 && (!A.data || !B.data))) throw std::invalid_argument("gemm_det: null operand");

  ProfileRegion region("Gemm::det");
  const GemmPath path = resolve_path(opt.path, "gemm_det");
  switch (K == 0 ? GemmPath::generic : path) {  // K = 0: nothing to pack, only the epilogue runs
    case GemmPath::packed_simd:
      gemm_packed<T>(ws, simd_microkernel<T>(), opt, M, N, K, A, B, C, ldc, bias, out, packed, row_sums);
      break;
    case GemmPath::packed_scalar:
      gemm_packed<T>(ws, &ukernel_scalar<T>, opt, M, N, K, A, B, C, ldc, bias, out, packed, row_sums);
      break;
    default:
      gemm_team<T>(1, M, N, K, A, 0, B, 0, C, 0, ldc, bias, out, opt.team,
                   row_sums && K > 0 ? RowSums::add : RowSums::none, row_sums);
      break;
  }
}
}  // namespace

template <class T>
void gemm_det(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C,
              std::ptrdiff_t ldc, const T* bias, GemmOut out, PackedB<T>* packed) {
  gemm_det_run<T>(ws, opt, M, N, K, A, B, C, ldc, bias, out, packed, nullptr);
}

template <class T>
void gemm_det(KernelWorkspace& ws, int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C, std::ptrdiff_t ldc,
              const T* bias, GemmOut out, PackedB<T>* packed) {
  gemm_det_run<T>(ws, GemmOptions{}, M, N, K, A, B, C, ldc, bias, out, packed, nullptr);
}

template <class T>
void gemm_det_row_sums(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A,
                       StridedMat<T> B, T* C, std::ptrdiff_t ldc, GemmOut out, T* row_sums) {
  if (!row_sums && M > 0) throw std::invalid_argument("gemm_det_row_sums: null row_sums");
  gemm_det_run<T>(ws, opt, M, N, K, A, B, C, ldc, nullptr, out, nullptr, row_sums);
}

template <class T>
void gemm_det_batched(KernelWorkspace& ws, int S, int M, int N, int K, StridedMat<T> A, std::ptrdiff_t a_step,
                      StridedMat<T> B, std::ptrdiff_t b_step, T* C, std::ptrdiff_t c_step, std::ptrdiff_t ldc,
                      GemmOut out, T* row_sums, std::ptrdiff_t rs_step) {
  if (S < 0) throw std::invalid_argument("gemm_det_batched: negative sample count S=" + std::to_string(S));
  if (row_sums && K <= 0) throw std::invalid_argument("gemm_det_batched: row sums need K > 0");
  if (S == 0 || M == 0 || (N == 0 && !row_sums)) return;
  if (N == 0 && resolve_path(GemmPath::automatic, "gemm_det_batched") == GemmPath::generic) {
    for (int s = 0; s < S; ++s) {  // no product, but the rows still have their sums (0 + r is r)
      T* rs = row_sums + s * rs_step;
      Kokkos::parallel_for(
          "Gemm::row_sums_zero", Kokkos::RangePolicy<ExecSpace>(0, M), KOKKOS_LAMBDA(const int m) { rs[m] = T(0); });
      gemm_detail::row_sums_generic(M, K, StridedMat<T>{A.data + s * a_step, A.rs, A.cs}, rs);
    }
    return;
  }
  if (resolve_path(GemmPath::automatic, "gemm_det_batched") != GemmPath::generic) {
    for (int s = 0; s < S; ++s) {
      const StridedMat<T> as{A.data + s * a_step, A.rs, A.cs}, bs{B.data + s * b_step, B.rs, B.cs};
      if (!row_sums) {
        gemm_det<T>(ws, M, N, K, as, bs, C + s * c_step, ldc, nullptr, out);
        continue;
      }
      // 0 + r is r: a chain that starts from +0 never ends at -0
      T* rs = row_sums + s * rs_step;
      std::fill(rs, rs + M, T(0));
      gemm_det_row_sums<T>(ws, GemmOptions{}, M, N, K, as, bs, C + s * c_step, ldc, out, rs);
    }
    return;
  }
  if (M < 0 || N < 0 || K < 0)
    throw std::invalid_argument("gemm_det_batched: negative shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                " K=" + std::to_string(K));
  if (M > 1 && ldc < N)
    throw std::invalid_argument("gemm_det_batched: ldc=" + std::to_string(ldc) +
                                " is smaller than N=" + std::to_string(N));
  if (!C || (K > 0 && (!A.data || !B.data))) throw std::invalid_argument("gemm_det_batched: null operand");
  ProfileRegion region("Gemm::det_batched");
  gemm_detail::gemm_team<T>(S, M, N, K, A, a_step, B, b_step, C, c_step, ldc, nullptr, out, 0,
                            row_sums ? gemm_detail::RowSums::store : gemm_detail::RowSums::none, row_sums, rs_step);
}

template <class T>
std::size_t gemm_det_device_scratch_bytes() {
  return gemm_detail::device_scratch_bytes<T>();
}

template void gemm_det_batched<float>(KernelWorkspace&, int, int, int, int, StridedMat<float>, std::ptrdiff_t,
                                      StridedMat<float>, std::ptrdiff_t, float*, std::ptrdiff_t, std::ptrdiff_t,
                                      GemmOut, float*, std::ptrdiff_t);
template void gemm_det_batched<double>(KernelWorkspace&, int, int, int, int, StridedMat<double>, std::ptrdiff_t,
                                       StridedMat<double>, std::ptrdiff_t, double*, std::ptrdiff_t, std::ptrdiff_t,
                                       GemmOut, double*, std::ptrdiff_t);
template std::size_t gemm_det_device_scratch_bytes<float>();
template std::size_t gemm_det_device_scratch_bytes<double>();

bool gemm_det_exact(KernelWorkspace& ws, const GemmOptions& opt, int M, int N, int K, int S, StridedMat<float> A,
                    std::ptrdiff_t a_step, StridedMat<float> B, std::ptrdiff_t b_step, const ExactTarget& target,
                    const ExactTarget* row_target) {
  using namespace gemm_detail;
  if (M < 0 || N < 0 || K < 0 || S < 0)
    throw std::invalid_argument("gemm_det_exact: negative shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                " K=" + std::to_string(K) + " S=" + std::to_string(S));
  if (target.exact.extent(0) != static_cast<std::size_t>(M) * static_cast<std::size_t>(N))
    throw std::invalid_argument("gemm_det_exact: the target holds " + std::to_string(target.exact.extent(0)) +
                                " accumulators, expected M*N = " + std::to_string(std::size_t(M) * N));
  if (row_target && row_target->exact.extent(0) != static_cast<std::size_t>(M))
    throw std::invalid_argument("gemm_det_exact: the row-sum target holds " +
                                std::to_string(row_target->exact.extent(0)) +
                                " accumulators, expected M = " + std::to_string(M));
  // Host-only kernel: automatic means the packed path whatever kernel_path() says (the device
  // path of the backward-weight is Linear's batched gemm_det_batched + exact add).
  const GemmPath path = resolve_path(opt.path == GemmPath::automatic && kHostAccessible
                                         ? (gemm_det_has_simd() ? GemmPath::packed_simd : GemmPath::packed_scalar)
                                         : opt.path,
                                     "gemm_det_exact");
  if (path == GemmPath::generic)
    throw std::invalid_argument(
        "gemm_det_exact: there is no generic path (device backends add per-sample gemm_det "
        "partials instead)");
  if (row_target && N == 0 && M > 0 && K > 0 && S > 0)
    throw std::invalid_argument("gemm_det_exact: row sums need N > 0 (they are formed while A is packed for B)");
  if (target.unfilled && !target.known_zero)
    throw std::logic_error("gemm_det_exact: an unfilled target must be known to be zero");
  if (row_target && row_target->unfilled)
    throw std::logic_error("gemm_det_exact: the row-sum target is added to, so it must be filled");
  if (M == 0 || N == 0 || K == 0 || S == 0) {  // every partial is 0: nothing to add
    if (target.unfilled) Kokkos::deep_copy(target.exact, Fixed128{});
    return false;
  }
  if (!A.data || !B.data) throw std::invalid_argument("gemm_det_exact: null operand");
  ProfileRegion region("Gemm::det_exact");
  return gemm_exact_packed(ws, path == GemmPath::packed_simd ? simd_microkernel<float>() : &ukernel_scalar<float>, opt,
                           M, N, K, S, A, a_step, B, b_step, target, row_target);
}

int gemm_det_exact_group(int K) {
  using namespace gemm_detail;
  const std::size_t g = exact_group_tuned(K, round_up(gemm_blocking().exact_mc, Tile<float>::MR));
  return static_cast<int>(std::min<std::size_t>(g, static_cast<std::size_t>(ExactSum::kMaxLimbAdds)));
}

template void gemm_det_row_sums<float>(KernelWorkspace&, const GemmOptions&, int, int, int, StridedMat<float>,
                                       StridedMat<float>, float*, std::ptrdiff_t, GemmOut, float*);
template void gemm_det_row_sums<double>(KernelWorkspace&, const GemmOptions&, int, int, int, StridedMat<double>,
                                        StridedMat<double>, double*, std::ptrdiff_t, GemmOut, double*);
template void gemm_det<float>(KernelWorkspace&, int, int, int, StridedMat<float>, StridedMat<float>, float*,
                              std::ptrdiff_t, const float*, GemmOut, PackedB<float>*);
template void gemm_det<double>(KernelWorkspace&, int, int, int, StridedMat<double>, StridedMat<double>, double*,
                               std::ptrdiff_t, const double*, GemmOut, PackedB<double>*);
template void gemm_det<float>(KernelWorkspace&, const GemmOptions&, int, int, int, StridedMat<float>, StridedMat<float>,
                              float*, std::ptrdiff_t, const float*, GemmOut, PackedB<float>*);
template void gemm_det<double>(KernelWorkspace&, const GemmOptions&, int, int, int, StridedMat<double>,
                               StridedMat<double>, double*, std::ptrdiff_t, const double*, GemmOut, PackedB<double>*);

}  // namespace minipipe
