// gemm_det implementations: a packed, register-tiled host path (AVX2+FMA or scalar microkernel)
// and a generic one-thread-per-element Kokkos kernel for device backends; identical bits by design.
#include "gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

// Host-only: the device passes of nvcc/hipcc never see the intrinsics.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <immintrin.h>
#define MINIPIPE_GEMM_AVX2 1
#endif

namespace minipipe {
namespace gemm_detail {

// Register tile MR x NR (6 rows x two SIMD vectors) and BLIS-style cache blocks: an MC x KC
// block of A stays in L2, a KC x NR micro-panel of B in L1, a KC x NC block of B in L3.
constexpr int kMR = 6;
template <class T>
struct Tile;
template <>
struct Tile<float> {
  static constexpr int NR = 16, MC = 168, KC = 256, NC = 4080;
};
template <>
struct Tile<double> {
  static constexpr int NR = 8, MC = 72, KC = 256, NC = 4080;
};
constexpr int kUnitPanels = 16;   // B micro-panels per parallel work unit (the parallel grain)
constexpr int kChunkBlocks = 24;  // MC blocks of A packed at once (bounds the A buffer)

inline int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}
inline int round_up(int a, int b) {
  return ceil_div(a, b) * b;
}

// Grow-only 64-byte aligned buffer. Each host thread that calls gemm_det owns its own (they are
// thread_local), so concurrent callers never share packing buffers.
template <class T>
class Scratch {
 public:
  T* get(std::size_t n) {
    if (n > cap_) {
      const std::size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
      buf_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (!buf_) throw std::bad_alloc();
      cap_ = n;
    }
    return buf_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> buf_;
  std::size_t cap_ = 0;
};

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
  constexpr int NR = Tile<T>::NR;
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

#ifdef MINIPIPE_GEMM_AVX2
// _mm256_fmadd_* rounds once, exactly like fmaf/fma, so the vector lanes reproduce the scalar
// microkernel bit for bit; the k loop stays sequential per lane.
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

// 12 named accumulators (6 rows x 2 vectors) so the compiler keeps all of them in registers.
#define MP_GEMM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <class S, class T>
void ukernel_avx2(int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
                  std::ptrdiff_t lde) {
  using V = typename S::V;
  constexpr int W = S::W;
  static_assert(2 * W == Tile<T>::NR, "register tile is two vectors wide");
#define MP_DECL(i) V c##i##a, c##i##b;
  MP_GEMM_ROWS(MP_DECL)
#undef MP_DECL
  if (load) {
#define MP_LOAD(i)                 \
  c##i##a = S::loadu(C + i * ldc); \
  c##i##b = S::loadu(C + i * ldc + W);
    MP_GEMM_ROWS(MP_LOAD)
#undef MP_LOAD
  } else {
#define MP_ZERO(i)     \
  c##i##a = S::zero(); \
  c##i##b = S::zero();
    MP_GEMM_ROWS(MP_ZERO)
#undef MP_ZERO
  }
#if defined(__GNUC__)
#pragma GCC unroll 4
#endif
  for (int k = 0; k < kb; ++k) {
    const V b0 = S::load(Bp);
    const V b1 = S::load(Bp + W);
#define MP_FMA(i)                     \
  {                                   \
    const V a = S::bcast(Ap + i);     \
    c##i##a = S::fma(a, b0, c##i##a); \
    c##i##b = S::fma(a, b1, c##i##b); \
  }
    MP_GEMM_ROWS(MP_FMA)
#undef MP_FMA
    Ap += kMR;
    Bp += 2 * W;
  }
  if (E) {
#define MP_EPI(i)                                   \
  c##i##a = S::add(c##i##a, S::loadu(E + i * lde)); \
  c##i##b = S::add(c##i##b, S::loadu(E + i * lde + W));
    MP_GEMM_ROWS(MP_EPI)
#undef MP_EPI
  }
#define MP_STORE(i)                \
  S::storeu(C + i * ldc, c##i##a); \
  S::storeu(C + i * ldc + W, c##i##b);
  MP_GEMM_ROWS(MP_STORE)
#undef MP_STORE
}
#undef MP_GEMM_ROWS

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
#endif  // MINIPIPE_GEMM_AVX2

template <class T>
Microkernel<T> simd_microkernel() {
#ifdef MINIPIPE_GEMM_AVX2
  return &ukernel_avx2<typename SimdOf<T>::type, T>;
#else
  return nullptr;
#endif
}

// Edge tiles (fewer than MR rows or NR columns left) run the same microkernel on a padded
// local copy, so the arithmetic of every valid element is unchanged.
template <class T>
void run_tile(Microkernel<T> uk, int kb, const T* Ap, const T* Bp, T* C, std::ptrdiff_t ldc, bool load, const T* E,
              std::ptrdiff_t lde, int mr, int nr) {
  constexpr int NR = Tile<T>::NR;
  if (mr == kMR && nr == NR) {
    uk(kb, Ap, Bp, C, ldc, load, E, lde);
    return;
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
  const int mr = std::min(kMR, M - m0);
  if (A.cs == 1) {  // rows contiguous in k: stream each row
    for (int i = 0; i < mr; ++i) {
      const T* src = A.data + static_cast<std::ptrdiff_t>(m0 + i) * A.rs + k0;
      for (int k = 0; k < kb; ++k) dst[k * kMR + i] = src[k];
    }
  } else {  // columns contiguous (A is a transpose): read MR neighbours per k
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
    for (int k = 0; k < kb; ++k) {
      T* d = dst + k * NR;
      for (int j = 0; j < NR; ++j) d[j] = src[j][k * rs];
      for (int j = nr; j < NR; ++j) d[j] = T(0);
    }
  }
}

// Host path. Loop nest (BLIS order): jc (NC columns) > pc (KC depth, sequential, so each acc
// continues in C in k order) > ic (chunk of rows) > parallel units of MC rows x 16 panels
// > jr (B micro-panel in L1) > ir (A micro-panels from L2). Threads only split (ic, jr) tiles;
// no element is ever split across threads, so the thread count cannot change any bit.
template <class T>
void gemm_packed(Microkernel<T> uk, const GemmOptions& opt, int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C,
                 std::ptrdiff_t ldc, const T* bias, GemmOut out) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Policy = Kokkos::RangePolicy<Host>;
  constexpr int NR = Tile<T>::NR;
  const int kc = opt.kc > 0 ? opt.kc : Tile<T>::KC;
  const int mc = round_up(opt.mc > 0 ? opt.mc : Tile<T>::MC, kMR);
  const int nc = round_up(opt.nc > 0 ? opt.nc : Tile<T>::NC, NR);
  const int mchunk = mc * kChunkBlocks;
  const int mq = mc / kMR;  // A micro-panels per unit

  static thread_local Scratch<T> a_buf, b_buf, c_buf;
  T* Ap = a_buf.get(static_cast<std::size_t>(kc) * round_up(std::min(mchunk, M), kMR));
  T* Bp = b_buf.get(static_cast<std::size_t>(kc) * round_up(std::min(nc, N), NR));

  // Epilogue addend E (row stride lde): the bias row (lde = 0) or the old C. With several
  // k-blocks C holds the running acc, so accumulate mode first saves the old C.
  const T* E = nullptr;
  std::ptrdiff_t lde = 0;
  if (out == GemmOut::accumulate) {
    if (K > kc) {
      T* saved = c_buf.get(static_cast<std::size_t>(M) * N);
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

  for (int jc = 0; jc < N; jc += nc) {
    const int nb = std::min(nc, N - jc);
    const int npan = ceil_div(nb, NR);
    for (int pc = 0; pc < K; pc += kc) {
      const int kb = std::min(kc, K - pc);
      const bool first = pc == 0;
      const bool last = pc + kb == K;
      Kokkos::parallel_for("Gemm::pack_b", Policy(0, npan), [=](const int p) {
        pack_b(B, N, jc + p * NR, pc, kb, Bp + static_cast<std::ptrdiff_t>(p) * kb * NR);
      });
      for (int ic = 0; ic < M; ic += mchunk) {
        const int mb = std::min(mchunk, M - ic);
        const int mpan = ceil_div(mb, kMR);
        Kokkos::parallel_for("Gemm::pack_a", Policy(0, mpan), [=](const int q) {
          pack_a(A, M, ic + q * kMR, pc, kb, Ap + static_cast<std::ptrdiff_t>(q) * kb * kMR);
        });
        const int n_ib = ceil_div(mpan, mq);
        const int n_jb = ceil_div(npan, kUnitPanels);
        // Consecutive units share their A block (ib is the slow index) so it stays in L2.
        Kokkos::parallel_for("Gemm::tiles", Policy(0, n_ib * n_jb), [=](const int u) {
          const int ib = u / n_jb;
          const int jb = u % n_jb;
          const int q1 = std::min(mpan, (ib + 1) * mq);
          const int p1 = std::min(npan, (jb + 1) * kUnitPanels);
          for (int p = jb * kUnitPanels; p < p1; ++p) {
            const int n0 = jc + p * NR;
            const T* bp = Bp + static_cast<std::ptrdiff_t>(p) * kb * NR;
            for (int q = ib * mq; q < q1; ++q) {
              const int m0 = ic + q * kMR;
              if (q + 1 < q1)
                prefetch_tile(C + (m0 + kMR) * ldc + n0, ldc, std::min(kMR, M - m0 - kMR));
              else if (p + 1 < p1)
                prefetch_tile(C + (ic + ib * mq * kMR) * ldc + n0 + NR, ldc, std::min(kMR, M - ic - ib * mq * kMR));
              const T* e = (last && E) ? E + m0 * lde + n0 : nullptr;
              run_tile(uk, kb, Ap + static_cast<std::ptrdiff_t>(q) * kb * kMR, bp, C + m0 * ldc + n0, ldc, !first, e,
                       lde, std::min(kMR, M - m0), std::min(NR, N - n0));
            }
          }
        });
      }
    }
  }
  fence_space(Host(), "Gemm::det packed");
}

// Generic kernel: one thread per output element, the same k order and the same epilogue, so it
// matches the packed path bit for bit. It is what device backends (CUDA, HIP, SYCL) run.
template <class T>
void gemm_generic(int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C, std::ptrdiff_t ldc, const T* bias,
                  GemmOut out) {
  const bool accumulate = out == GemmOut::accumulate;
  using Policy = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(
      "Gemm::det_generic", Policy(0, static_cast<std::int64_t>(M) * N), KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t m = idx / N;
        const std::int64_t n = idx % N;
        const T* a = A.data + m * A.rs;
        const T* b = B.data + n * B.cs;
        T acc = T(0);
        for (int k = 0; k < K; ++k) acc = fma_exact(a[k * A.cs], b[k * B.rs], acc);
        T* c = C + m * ldc + n;
        if (accumulate)
          *c = *c + acc;
        else if (bias)
          *c = acc + bias[n];
        else
          *c = acc;
      });
  fence_space(ExecSpace(), "Gemm::det generic");
}

}  // namespace gemm_detail

bool gemm_det_has_simd() {
#ifdef MINIPIPE_GEMM_AVX2
  return true;
#else
  return false;
#endif
}

const char* gemm_det_microkernel() {
#ifdef MINIPIPE_GEMM_AVX2
  return "AVX2+FMA 6x16 (float) / 6x8 (double)";
#else
  return "scalar fma_exact 6x16 (float) / 6x8 (double)";
#endif
}

template <class T>
void gemm_det(const GemmOptions& opt, int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C, std::ptrdiff_t ldc,
              const T* bias, GemmOut out) {
  using namespace gemm_detail;
  if (M < 0 || N < 0 || K < 0)
    throw std::invalid_argument("gemm_det: negative shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                " K=" + std::to_string(K));
  if (out == GemmOut::accumulate && bias)
    throw std::invalid_argument("gemm_det: a bias cannot be combined with GemmOut::accumulate");
  if (M == 0 || N == 0) return;
  if (M > 1 && ldc < N)
    throw std::invalid_argument("gemm_det: ldc=" + std::to_string(ldc) + " is smaller than N=" + std::to_string(N));
  if (!C || (K > 0 && (!A.data || !B.data))) throw std::invalid_argument("gemm_det: null operand");

  ProfileRegion region("Gemm::det");
  constexpr bool host_ok = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;
  GemmPath path = opt.path;
  if (path == GemmPath::automatic)
    path = !host_ok ? GemmPath::generic : (gemm_det_has_simd() ? GemmPath::packed_simd : GemmPath::packed_scalar);
  if (K == 0) path = GemmPath::generic;  // nothing to pack: only the epilogue runs
  if (path != GemmPath::generic && !host_ok)
    throw std::invalid_argument("gemm_det: the packed path needs host-accessible memory");
  if (path == GemmPath::packed_simd && !gemm_det_has_simd())
    throw std::invalid_argument("gemm_det: this build has no AVX2+FMA microkernel");

  switch (path) {
    case GemmPath::packed_simd:
      gemm_packed<T>(simd_microkernel<T>(), opt, M, N, K, A, B, C, ldc, bias, out);
      break;
    case GemmPath::packed_scalar:
      gemm_packed<T>(&ukernel_scalar<T>, opt, M, N, K, A, B, C, ldc, bias, out);
      break;
    default:
      gemm_generic<T>(M, N, K, A, B, C, ldc, bias, out);
      break;
  }
}

template <class T>
void gemm_det(int M, int N, int K, StridedMat<T> A, StridedMat<T> B, T* C, std::ptrdiff_t ldc, const T* bias,
              GemmOut out) {
  gemm_det<T>(GemmOptions{}, M, N, K, A, B, C, ldc, bias, out);
}

template void gemm_det<float>(int, int, int, StridedMat<float>, StridedMat<float>, float*, std::ptrdiff_t, const float*,
                              GemmOut);
template void gemm_det<double>(int, int, int, StridedMat<double>, StridedMat<double>, double*, std::ptrdiff_t,
                               const double*, GemmOut);
template void gemm_det<float>(const GemmOptions&, int, int, int, StridedMat<float>, StridedMat<float>, float*,
                              std::ptrdiff_t, const float*, GemmOut);
template void gemm_det<double>(const GemmOptions&, int, int, int, StridedMat<double>, StridedMat<double>, double*,
                               std::ptrdiff_t, const double*, GemmOut);

}  // namespace minipipe
