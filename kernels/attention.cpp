// Causal self-attention kernels, explicitly instantiated for float and double. Deterministic and
// fast mode run the same loops with det::exp (libm exp is a scalar call per score, det::exp is
// branch-free and vectorizes), except in the host AVX-512 float softmax: there fast mode takes a
// shorter exp and multiplies by 1 / sum (about an ulp from deterministic mode's att; its tolerance
// contract allows that). The backward runs the same loops in both modes.
//
// Every output element is one fixed reduction chain, the same on every backend (docs/design.md §4),
// written once as plain loops in attention_order.hpp.
// The kernels below only choose which thread computes which elements and in what loop order:
// one team per (b, h) stages the head's K (forward) or V (backward) transposed in scratch, then
// computes register tiles of independent elements (4 queries x 16 keys of scores, 4 queries x
// up to 16 channels of out/dq, 2 keys x up to 16 channels of dk/dv) so the host compiler can
// vectorise across elements while each element's own chain runs in its original order. The
// backward pass keeps dpre of the head in scratch (computed once instead of three times; the
// same values). Heads too large for team scratch run attention_order's own row kernels.
// Memory, not FMAs, set much of the host time at T = 128 (a layer's qkv, att and dqkv exceed L2):
// the forward forms a query block's softmax in an L1 buffer and streams the final att rows out
// (no read of each line before it is written), and both passes prefetch the rows that a later
// block or phase touches first. Neither changes a value.
// The device path (attention_device.cpp, taken when use_device_path()) runs the same chains in
// tiled team kernels whose scratch does not grow with T.
#include "attention.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attention_device.hpp"
#include "attention_order.hpp"
#include "detmath.hpp"
#include "host_simd.hpp"
#include "kernel_path.hpp"
#include "row_reduce.hpp"
#include "team.hpp"

// The host path's team kernels (and everything below that only they use) exist on host backends
// only. A GPU build always takes the device path (its memory is not host-accessible, kernel_path.cpp),
// and a head whose device tiles fit no team scratch takes attention_order's row kernels: at their
// GPU shape (128 threads) the host kernels spilled 47 to 82 VGPRs and 68 to 101 SGPRs on gfx90a
// (scripts/device_budgets.sh). Every path gives the same bits.
#if !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP) && !defined(KOKKOS_ENABLE_SYCL)
#define MINIPIPE_ATTENTION_HOST_TEAMS 1
#endif

namespace minipipe {

namespace {
void check_shapes(const char* where, int B, int T, int C, int H, std::size_t qkv_rows, std::size_t qkv_cols,
                  std::size_t att_rows, std::size_t att_cols, std::size_t io_rows, std::size_t io_cols) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument(std::string(where) + ": " + what); };
  if (B <= 0 || T <= 0 || C <= 0 || H <= 0) fail("B, T, C, H must be positive");
  if (C % H != 0) fail("C = " + std::to_string(C) + " is not divisible by H = " + std::to_string(H));
  const std::size_t N = std::size_t(B) * std::size_t(T);
  if (qkv_rows != N || qkv_cols != 3 * std::size_t(C)) fail("qkv must be (B*T, 3C)");
  if (att_rows != N * std::size_t(H) || att_cols != std::size_t(T)) fail("att must be (B*H*T, T)");
  if (io_rows != N || io_cols != std::size_t(C)) fail("out/dout must be (B*T, C)");
}

#ifdef MINIPIPE_ATTENTION_HOST_TEAMS
// Register tile shapes: kKeys and kChan fill two 256-bit registers per row (16 floats, 8 doubles).
// With AVX-512 the same tiles are one register wide, so they grow to 8 queries x 32 keys (16 zmm
// accumulators), and dk/dv tiles to 4 keys (16 zmm: 2 keys left the loop bound by address arithmetic
// and a spill, at 8 FMAs per step). Tile shapes only decide which elements run side by side, never
// an element's chain, so they change no bit.
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
constexpr int kTileBytes = 128, kTileQueries = 8;
#else
constexpr int kTileBytes = 64, kTileQueries = 4;
#endif
template <class Real>
struct Tile {
  static constexpr int kQueries = kTileQueries;                 // query rows per score / out / dq tile
  static constexpr int kKeyRows = kTileQueries / 2;             // key rows per dk/dv tile
  static constexpr int kKeys = int(kTileBytes / sizeof(Real));  // keys per score tile
  static constexpr int kChan = int(kTileBytes / sizeof(Real));  // widest channel chunk of out / dq / dk / dv
};

template <class Real>
using Scratch = Kokkos::View<Real*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Team scratch level for `bytes` per team, or -1 when it fits neither (then the row kernels run).
int scratch_level(std::size_t bytes) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  if (bytes <= static_cast<std::size_t>(Policy::scratch_size_max(0))) return 0;
  if (bytes <= static_cast<std::size_t>(Policy::scratch_size_max(1))) return 1;
  return -1;
}

// The launch shape of the host path's team kernels: a team per (b, h), Kokkos::AUTO threads on a
// host backend (one on Serial and OpenMP), 128 on a GPU (where they run only for heads whose tiles
// the device path cannot hold); level -1 when the head's scratch fits no level.
team::Shape host_team_shape(team::Target target, int league, std::size_t bytes) {
  team::Shape s;
  s.league = league;
  s.team = target == team::Target::host ? team::kAuto : 128;
  s.scratch = bytes;
  s.level = scratch_level(bytes);
  if (target == team::Target::gpu && s.level == 0 && bytes > team::kGpuScratchLevel0)
    s.level = bytes <= static_cast<std::size_t>(Kokkos::TeamPolicy<ExecSpace>::scratch_size_max(1)) ? 1 : -1;
  return s;
}

int round_up(int n, int m) {
  return (n + m - 1) / m * m;
}

// Prefetch n elements of each of `rows` rows (stride ld) from p: the next block's rows are in L3 or
// memory (a layer's att and qkv exceed L2), and one block's loads and stores alone leave the core
// waiting on each miss in turn. write: for rows about to be stored (no read-for-ownership stall).
template <class Real>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_rows(const Real* p, std::size_t ld, int rows, int n, bool write) {
#if defined(__GNUC__)
  constexpr int kLine = int(64 / sizeof(Real));
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; i += kLine) {
      if (write)
        __builtin_prefetch(p + r * ld + i, 1, 3);
      else
        __builtin_prefetch(p + r * ld + i, 0, 3);
    }
#else
  (void)p, (void)ld, (void)rows, (void)n, (void)write;
#endif
}

// dst (n, ldd) = src^T of the rows x n block src (row stride lds), zero-padded from column rows to
// ldd: dst[i*ldd + r] = src[r*lds + i]. Blocks of kStageRows source rows per thread: a block reads
// kStageRows contiguous rows and writes n short runs, all in L1, where walking one column of src
// per element strides through all the head's rows (qkv rows are 3C apart) once per channel.
constexpr int kStageRows = 16;
template <class Real, class Team>
KOKKOS_INLINE_FUNCTION void stage_transposed(const Team& tm, const Real* src, int lds, int rows, int n, Real* dst,
                                             int ldd) {
  team::threads(tm, (ldd + kStageRows - 1) / kStageRows, [&](const int blk) {
    const int r0 = blk * kStageRows;
    const int r1 = r0 + kStageRows < ldd ? r0 + kStageRows : ldd;
    int i0 = 0;  // channels staged so far
#ifdef MINIPIPE_HOST_AVX512
    // Whole 16 x 16 blocks go through registers (host_simd::transpose16): one contiguous 64-byte store
    // per channel, where the element loop stored one float at a time Tp floats apart (a tenth of the
    // forward kernel at T = 256). Rows past `rows` read zeros.
    if constexpr (std::is_same<Real, float>::value && kStageRows == 16) {
      if (r1 - r0 == 16) {
        alignas(64) static constexpr float kZeros[16] = {};
        const float* from[16];
        for (; i0 + 16 <= n; i0 += 16) {
          for (int j = 0; j < 16; ++j)
            from[j] = r0 + j < rows ? src + static_cast<std::size_t>(r0 + j) * lds + i0 : kZeros;
          host_simd::transpose16(from, 16, dst + static_cast<std::size_t>(i0) * ldd + r0, ldd);
        }
      }
    }
#endif
    for (int r = r0; r < r1; ++r) {
      const Real* s = src + static_cast<std::size_t>(r) * lds;
      if (r < rows)
        for (int i = i0; i < n; ++i) dst[static_cast<std::size_t>(i) * ldd + r] = s[i];
      else
        for (int i = i0; i < n; ++i) dst[static_cast<std::size_t>(i) * ldd + r] = 0;
    }
  });
}

#ifdef MINIPIPE_HOST_AVX512
// rowred::tree<Sum> of the 32 lanes p0 (0..15), p1 (16..31): p[l] = p[l] + p[l + w] for w = 16 .. 1.
inline float sum_tree(__m512 p0, __m512 p1) {
  p0 = _mm512_add_ps(p0, p1);                                  // w = 16
  p0 = _mm512_add_ps(p0, _mm512_shuffle_f32x4(p0, p0, 0xEE));  // w = 8: lanes 8..15 onto 0..7
  p0 = _mm512_add_ps(p0, _mm512_shuffle_f32x4(p0, p0, 0x55));  // w = 4: lanes 4..7 onto 0..3
  p0 = _mm512_add_ps(p0, _mm512_permute_ps(p0, 0xEE));         // w = 2: lanes 2, 3 onto 0, 1
  p0 = _mm512_add_ps(p0, _mm512_permute_ps(p0, 0x55));         // w = 1: lane 1 onto 0
  return _mm512_cvtss_f32(p0);
}

// Masks of the lanes 0..15 and 16..31 that take one of rem < 32 elements left.
inline void tail_masks(int rem, __mmask16& k0, __mmask16& k1) {
  k0 = static_cast<__mmask16>(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
  k1 = static_cast<__mmask16>(rem <= 16 ? 0u : (1u << (rem - 16)) - 1u);
}
#endif

// max over a[0..n) in the canonical lane order of row_reduce.hpp (ties and NaNs as Max::combine),
// and in_range for det::exp_array's a - max: 1 when every a[i] - max (rounded, as exp_array forms
// it) lies in det::exp_normal_range, 0 when one may not, -1 when not known (exp_array checks).
// The host AVX-512 body keeps the 32 lanes in two registers: MAXPS(x, m) is x > m ? x : m, which is
// Max::combine(m, x) for every input, NaN and signed zeros included, and the tree halves the lanes
// with the same pairs (l, l + w); the generic loop keeps the lanes in memory, with a scalar tail.
// Beside the maximum it tracks the row's minimum, whose a - max is the lowest (rounding is
// monotone; the highest, max - max, is 0), and any NaN (which the max ignores): the softmax's exp
// pass then needs no compare pass of its own over the row.
template <class Real>
KOKKOS_INLINE_FUNCTION Real row_max(const Real* a, int n, int& in_range) {
#ifdef MINIPIPE_HOST_AVX512
  if constexpr (std::is_same<Real, float>::value && rowred::kLanes == 32) {
    const __m512 id = _mm512_set1_ps(rowred::Max::identity<float>());
    __m512 p0 = id, p1 = id;  // lanes 0..15 and 16..31
    __m512 lo = _mm512_set1_ps(std::numeric_limits<float>::infinity());
    __mmask16 nan = 0;
    int c0 = 0;
    for (; c0 + 32 <= n; c0 += 32) {
      const __m512 x0 = _mm512_loadu_ps(a + c0), x1 = _mm512_loadu_ps(a + c0 + 16);
      p0 = _mm512_max_ps(x0, p0);
      p1 = _mm512_max_ps(x1, p1);
      lo = _mm512_min_ps(_mm512_min_ps(x0, x1), lo);
      nan |= _mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q);  // x0 or x1 is NaN
    }
    if (c0 < n) {  // lanes l < n - c0 take one more
      __mmask16 k0, k1;
      tail_masks(n - c0, k0, k1);
      const __m512 x0 = _mm512_maskz_loadu_ps(k0, a + c0), x1 = _mm512_maskz_loadu_ps(k1, a + c0 + 16);
      p0 = _mm512_mask_max_ps(p0, k0, x0, p0);
      p1 = _mm512_mask_max_ps(p1, k1, x1, p1);
      lo = _mm512_mask_min_ps(lo, k0, x0, lo);
      lo = _mm512_mask_min_ps(lo, k1, x1, lo);
      nan |= _mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q);  // the lanes past n hold zeros
    }
    p0 = _mm512_max_ps(p1, p0);                                  // w = 16
    p0 = _mm512_max_ps(_mm512_shuffle_f32x4(p0, p0, 0xEE), p0);  // w = 8: lanes 8..15 onto 0..7
    p0 = _mm512_max_ps(_mm512_shuffle_f32x4(p0, p0, 0x55), p0);  // w = 4: lanes 4..7 onto 0..3
    p0 = _mm512_max_ps(_mm512_permute_ps(p0, 0xEE), p0);         // w = 2: lanes 2, 3 onto 0, 1
    p0 = _mm512_max_ps(_mm512_permute_ps(p0, 0x55), p0);         // w = 1: lane 1 onto 0
    const float mx = _mm512_cvtss_f32(p0);
    const float d = _mm512_reduce_min_ps(lo) - mx;  // NaN when mx is infinite and so is the minimum
    in_range = nan == 0 && det::exp_normal_range(d) ? 1 : 0;
    return mx;
  }
#endif
  in_range = -1;
  return rowred::reduce<rowred::Max, Real>(
      n, [&](const int t2, const Real m) { return rowred::Max::combine<Real>(m, a[t2]); });
}

// rowred::reduce<Sum> over a[0..n): lane l adds a[l], a[l + 32], ... to +0, then the pairwise tree.
// The host AVX-512 body keeps the 32 lanes in two registers and adds the last partial block under a
// mask (lanes past n are left as they are, as reduce's tail leaves them); the generic form keeps the
// lanes on the stack and runs the tail as scalar code.
template <class Real>
KOKKOS_INLINE_FUNCTION Real row_sum(const Real* a, int n) {
#ifdef MINIPIPE_HOST_AVX512
  if constexpr (std::is_same<Real, float>::value && rowred::kLanes == 32) {
    __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();  // lanes 0..15 and 16..31
    int c0 = 0;
    for (; c0 + 32 <= n; c0 += 32) {
      p0 = _mm512_add_ps(p0, _mm512_loadu_ps(a + c0));
      p1 = _mm512_add_ps(p1, _mm512_loadu_ps(a + c0 + 16));
    }
    if (c0 < n) {  // lanes l < n - c0 take one more
      __mmask16 k0, k1;
      tail_masks(n - c0, k0, k1);
      p0 = _mm512_mask_add_ps(p0, k0, p0, _mm512_maskz_loadu_ps(k0, a + c0));
      p1 = _mm512_mask_add_ps(p1, k1, p1, _mm512_maskz_loadu_ps(k1, a + c0 + 16));
    }
    return sum_tree(p0, p1);
  }
#endif
  return rowred::reduce<rowred::Sum, Real>(n, [&](const int i, const Real p) { return p + a[i]; });
}

// rowred::reduce<Sum> over i < n of fma(x[i], y[i], lane): each lane an fma chain from +0, then the
// pairwise tree; the host AVX-512 body as row_sum's.
template <class Real>
KOKKOS_INLINE_FUNCTION Real row_dot(const Real* x, const Real* y, int n) {
#ifdef MINIPIPE_HOST_AVX512
  if constexpr (std::is_same<Real, float>::value && rowred::kLanes == 32) {
    __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
    int c0 = 0;
    for (; c0 + 32 <= n; c0 += 32) {
      p0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + c0), _mm512_loadu_ps(y + c0), p0);
      p1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + c0 + 16), _mm512_loadu_ps(y + c0 + 16), p1);
    }
    if (c0 < n) {
      __mmask16 k0, k1;
      tail_masks(n - c0, k0, k1);
      p0 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(k0, x + c0), _mm512_maskz_loadu_ps(k0, y + c0), p0, k0);
      p1 =
          _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(k1, x + c0 + 16), _mm512_maskz_loadu_ps(k1, y + c0 + 16), p1, k1);
    }
    return sum_tree(p0, p1);
  }
#endif
  return rowred::reduce<rowred::Sum, Real>(n, [&](const int i, const Real a) { return fma_exact(x[i], y[i], a); });
}

#ifdef MINIPIPE_HOST_AVX512
// A softmax row a[0..n) of the block buffer in place, given its max mx and every a - mx in
// det::exp_normal_range (row_max's in_range), in two steps: softmax_row_exps forms the exps and the
// lane sums of rowred::reduce<Sum> in one pass (lane l adds e[l], e[l + 32], ... from +0, the last
// block under a mask, then the tree: row_sum's order and value) and returns the sum;
// softmax_row_divide divides. kFast: fast mode's exp and a multiplication by 1 / sum. Whole
// vectors up to n rounded up to 16 (or 32 in the exp pass; the buffer row has room): the values
// past n are never read (store_att_row writes zeros there, P v stops at the diagonal).
template <bool kFast>
inline float softmax_row_exps(float* a, int n, float mx) {
  const __m512 m = _mm512_set1_ps(mx);
  auto ex = [](__m512 x) { return kFast ? host_simd::exp_fast16(x) : host_simd::exp_normal16(x); };
  __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();  // lanes 0..15 and 16..31
  int c0 = 0;
  for (; c0 + 32 <= n; c0 += 32) {
    const __m512 e0 = ex(_mm512_sub_ps(_mm512_loadu_ps(a + c0), m));
    const __m512 e1 = ex(_mm512_sub_ps(_mm512_loadu_ps(a + c0 + 16), m));
    _mm512_storeu_ps(a + c0, e0);
    _mm512_storeu_ps(a + c0 + 16, e1);
    p0 = _mm512_add_ps(p0, e0);
    p1 = _mm512_add_ps(p1, e1);
  }
  if (c0 < n) {  // lanes l < n - c0 take one more
    __mmask16 k0, k1;
    tail_masks(n - c0, k0, k1);
    const __m512 e0 = ex(_mm512_sub_ps(_mm512_maskz_loadu_ps(k0, a + c0), m));
    _mm512_storeu_ps(a + c0, e0);
    p0 = _mm512_mask_add_ps(p0, k0, p0, e0);
    if (k1) {
      const __m512 e1 = ex(_mm512_sub_ps(_mm512_maskz_loadu_ps(k1, a + c0 + 16), m));
      _mm512_storeu_ps(a + c0 + 16, e1);
      p1 = _mm512_mask_add_ps(p1, k1, p1, e1);
    }
  }
  return sum_tree(p0, p1);
}

// a[0..n) / sum (kFast: times 1 / sum), whole vectors.
template <bool kFast>
inline void softmax_row_divide(float* a, int n, float sum) {
  if (kFast) {
    const __m512 rs = _mm512_set1_ps(1.0f / sum);
    for (int c = 0; c < n; c += 16) _mm512_storeu_ps(a + c, _mm512_mul_ps(_mm512_loadu_ps(a + c), rs));
  } else {
    const __m512 s = _mm512_set1_ps(sum);
    for (int c = 0; c < n; c += 16) _mm512_storeu_ps(a + c, _mm512_div_ps(_mm512_loadu_ps(a + c), s));
  }
}

// The rows t0 + q (q < nq) of a query block in the block buffer (row length a multiple of 32)
// from their maxima mx and row_max's in_range: softmax_row_exps then softmax_row_divide, or
// det::exp's own select paths for a row with an exp outside exp_normal's range. Each row's division
// waits for its sum tree, which waits for its last exp: it runs after the next row's exps (the
// same values), which the core overlaps with that wait. slot.one() between the rows.
template <class Slot>
inline void softmax_rows_fused(float* ab, int lda, int t0, int nq, const float* mx, const int* in_range, bool fast,
                               Slot& slot) {
  float* prev = nullptr;  // the row whose division is pending, its length and sum
  int prev_n = 0;
  float prev_sum = 0;
  auto divide_prev = [&] {
    if (!prev) return;
    if (fast)
      softmax_row_divide<true>(prev, prev_n, prev_sum);
    else
      softmax_row_divide<false>(prev, prev_n, prev_sum);
    prev = nullptr;
  };
  for (int q = 0; q < nq; ++q) {
    float* a = ab + static_cast<std::size_t>(q) * lda;
    const int n = t0 + q + 1;
    if (in_range[q] == 1) {
      const float sum = fast ? softmax_row_exps<true>(a, n, mx[q]) : softmax_row_exps<false>(a, n, mx[q]);
      divide_prev();
      prev = a, prev_n = n, prev_sum = sum;
    } else {
      divide_prev();
      det::exp_array(a, mx[q], a, n, (n + 15) / 16 * 16, 0);
      const float sum = row_sum(a, n);
      for (int t2 = 0; t2 < n; ++t2) a[t2] = a[t2] / sum;
    }
    slot.one();  // the caller's other work (PendingRows) between the rows
  }
  divide_prev();
}
#endif

// Softmax of the score rows t0 + q (q < nq) of a query block in place: a row t of length n = t + 1
// becomes exp(a - max) / sum and its keys n..T-1 zeros, with the max and the sum in the canonical
// lane order of row_reduce.hpp (the device path forms the same lanes).
// One pass over a row (in L1) per step: the max, the exps of a - max (det::exp_array forms a - max
// in its passes; det::exp's bits, through det::exp_normal when every a - max is in its range, the
// usual case: scores within 87 of the row's max), the lane sums (a missing element adds nothing),
// the division. Each loop keeps its values in registers; fused into one loop, the lane and exp
// arrays went through the stack. The exps run in whole 512-bit blocks up to the row's end T: past n
// they are overwritten with zeros. Each step runs over all the block's rows before the next: one
// row's steps are one long dependency chain (max tree, exps, sum tree, division), and rows side by
// side give the core independent work to overlap. In the block buffer on an AVX-512 host (float),
// softmax_rows_fused forms a row's exps and lane sums in one pass (the same values).
template <class Real, class Slot>
KOKKOS_INLINE_FUNCTION void softmax_rows(Real* ab, int lda, int t0, int nq, int T, bool zero_tail, bool fast,
                                         Slot& slot) {
  constexpr int QT = Tile<Real>::kQueries;
  constexpr int E = int(64 / sizeof(Real));  // det::exp_array's block
  Real v[QT];                                // each row's max, then its sum
  int in_range[QT];                          // row_max's word on the exps' range
  for (int q = 0; q < nq; ++q) v[q] = row_max(ab + static_cast<std::size_t>(q) * lda, t0 + q + 1, in_range[q]);
#ifdef MINIPIPE_HOST_AVX512
  if constexpr (std::is_same<Real, float>::value && rowred::kLanes == 32) {
    if (!zero_tail) {  // rows in the block buffer, T (its row length) a multiple of 32
      softmax_rows_fused(ab, lda, t0, nq, v, in_range, fast, slot);
      return;
    }
  }
#endif
  (void)fast;
  for (int q = 0; q < nq; ++q) {
    const int n = t0 + q + 1, n_pad = (n + E - 1) / E * E;
    Real* a = ab + static_cast<std::size_t>(q) * lda;
    det::exp_array(a, v[q], a, n, n_pad <= T ? n_pad : 0, in_range[q]);
    slot.one();  // the caller's other work (PendingRows) between the rows' exps
  }
  for (int q = 0; q < nq; ++q) v[q] = row_sum(ab + static_cast<std::size_t>(q) * lda, t0 + q + 1);
  for (int q = 0; q < nq; ++q) {
    const int n = t0 + q + 1;
    const Real sum = v[q];
    Real* a = ab + static_cast<std::size_t>(q) * lda;
    if (zero_tail)
      for (int t2 = 0; t2 < T; ++t2) a[t2] = t2 < n ? a[t2] / sum : Real(0);
    else
      for (int t2 = 0; t2 < n; ++t2) a[t2] = a[t2] / sum;
  }
}

// att row t from its softmax src (keys t2 < n = t + 1) in the block buffer: the keys t2 <= t, zeros
// above. With AVX-512, a 64-byte aligned row goes out through streaming stores: a layer's att
// (B*H*T*T) stays in no cache until backward reads it, and ordinary stores first read every line
// they write (twice the memory traffic; the forward waited on those reads). The same values as a
// plain copy.
template <class Real>
KOKKOS_INLINE_FUNCTION void store_att_row(const Real* src, Real* dst, int n, int T) {
#ifdef MINIPIPE_HOST_AVX512
  if constexpr (std::is_same<Real, float>::value) {
    if (reinterpret_cast<std::uintptr_t>(dst) % 64 == 0) {
      int c = 0;
      for (; c + 16 <= T; c += 16) {
        const int k = n - c;  // lanes that keep a softmax value
        const __mmask16 m = static_cast<__mmask16>(k >= 16 ? 0xFFFFu : k > 0 ? (1u << k) - 1u : 0u);
        _mm512_stream_ps(dst + c, _mm512_maskz_loadu_ps(m, src + c));
      }
      for (; c < T; ++c) dst[c] = c < n ? src[c] : 0.0f;
      return;
    }
  }
#endif
  for (int t2 = 0; t2 < T; ++t2) dst[t2] = t2 < n ? src[t2] : Real(0);
}

// The att rows of a finished query block (rows t0 + q, q < nq, from src with stride lds), stored a
// row at a time by one() from the next block's compute: streaming stores issued back to back stall
// once the core's write-combining buffers are full (a sixth of the forward), spread between FMAs
// they drain while the core computes.
template <class Real>
struct PendingRows {
  const Real* src = nullptr;
  Real* dst = nullptr;
  int lds = 0, lda = 0, t0 = 0, nq = 0, T = 0, next = 0;
  KOKKOS_INLINE_FUNCTION void one() {
    if (next >= nq) return;
    store_att_row(src + static_cast<std::size_t>(next) * lds, dst + static_cast<std::size_t>(next) * lda, t0 + next + 1,
                  T);
    ++next;
  }
  KOKKOS_INLINE_FUNCTION void rest() {
    while (next < nq) one();
  }
};

// acc[q][j] = fma chain over i = 0..n-1 of a[q][i] * bt[i*ldb + j], starting from 0:
// kQueries x kKeys independent dot products, each summed in index order.
template <class Real>
KOKKOS_INLINE_FUNCTION void dot_tile(const Real* const (&a)[Tile<Real>::kQueries], const Real* bt, int ldb, int n,
                                     Real (&acc)[Tile<Real>::kQueries][Tile<Real>::kKeys]) {
  constexpr int QT = Tile<Real>::kQueries, KW = Tile<Real>::kKeys;
  // Step i = 0 (n >= 1) is fma(a, b, 0) stored straight into acc: with acc zeroed first, the
  // compiler made the zeroing a memset call and loaded the tile back before the loop.
  for (int q = 0; q < QT; ++q) {
    const Real aq = a[q][0];
    for (int j = 0; j < KW; ++j) acc[q][j] = fma_exact(aq, bt[j], Real(0));
  }
  for (int i = 1; i < n; ++i) {
    const Real* bi = bt + static_cast<std::size_t>(i) * ldb;
    for (int q = 0; q < QT; ++q) {
      const Real aq = a[q][i];
      for (int j = 0; j < KW; ++j) acc[q][j] = fma_exact(aq, bi[j], acc[q][j]);
    }
  }
}

// For the query rows t0 + q (q < nq) and channels i0..i0+W-1:
//   dst[q][i0 + j] = fma chain over s = 0..t0+q of c[q][s] * m[s*ldm + i0 + j], starting from 0.
// The s <= t0 part is shared by all rows (rows q >= nq point at a valid row; never stored), the
// triangle s = t0+1..t0+nq-1 follows in the same ascending order per row.
template <int W, class Real>
KOKKOS_INLINE_FUNCTION void rows_chunk(const Real* const (&c)[Tile<Real>::kQueries], const Real* m, int ldm, int t0,
                                       int nq, int i0, Real* const (&dst)[Tile<Real>::kQueries]) {
  constexpr int QT = Tile<Real>::kQueries;
  Real acc[QT][W];
  for (int q = 0; q < QT; ++q) {  // s = 0 (t0 >= 0): the first step of each chain (as in dot_tile)
    const Real cq = c[q][0];
    for (int j = 0; j < W; ++j) acc[q][j] = fma_exact(cq, m[i0 + j], Real(0));
  }
  for (int s = 1; s <= t0; ++s) {
    const Real* ms = m + static_cast<std::size_t>(s) * ldm + i0;
    for (int q = 0; q < QT; ++q) {
      const Real cq = c[q][s];
      for (int j = 0; j < W; ++j) acc[q][j] = fma_exact(cq, ms[j], acc[q][j]);
    }
  }
  for (int s = t0 + 1; s < t0 + nq; ++s) {
    const Real* ms = m + static_cast<std::size_t>(s) * ldm + i0;
    for (int q = 0; q < QT; ++q) {  // constant indices keep acc in registers
      if (q < s - t0 || q >= nq) continue;
      const Real cq = c[q][s];
      for (int j = 0; j < W; ++j) acc[q][j] = fma_exact(cq, ms[j], acc[q][j]);
    }
  }
  for (int q = 0; q < QT; ++q) {
    if (q >= nq) continue;
    for (int j = 0; j < W; ++j) dst[q][i0 + j] = acc[q][j];
  }
}

// rows_chunk over all n channels: chunks of kChan, kChan/2, kChan/4, then single channels.
template <class Real>
KOKKOS_INLINE_FUNCTION void rows_accumulate(const Real* const (&c)[Tile<Real>::kQueries], const Real* m, int ldm,
                                            int t0, int nq, int n, Real* const (&dst)[Tile<Real>::kQueries]) {
  constexpr int W = Tile<Real>::kChan;
  int i = 0;
  for (; i + W <= n; i += W) rows_chunk<W>(c, m, ldm, t0, nq, i, dst);
  if (i + W / 2 <= n) {
    rows_chunk<W / 2>(c, m, ldm, t0, nq, i, dst);
    i += W / 2;
  }
  if (i + W / 4 <= n) {
    rows_chunk<W / 4>(c, m, ldm, t0, nq, i, dst);
    i += W / 4;
  }
  for (; i < n; ++i) rows_chunk<1>(c, m, ldm, t0, nq, i, dst);
}

#ifdef MINIPIPE_HOST_AVX512
// cols_chunk's full float tile (4 keys x 32 channels) over the queries t = s0..T-1, with pt, ta, qt
// and dt at query s0's dpre and att (key s0) and q and dout (channel i0) rows. Each step loads the
// query's q and dout chunks once for the keys k that take it (k <= t - s0). Inlined into the
// backward kernel as loops over keys and channels, the loop had too few free registers: GCC folded
// those loads into every FMA (16 512-bit loads per 16 FMAs) and kept the counter and the strides
// on the stack, half of the backward's time. The same chains.
struct DkvTile {
  __m512 k0[4] = {}, k1[4] = {}, v0[4] = {}, v1[4] = {};  // dk, dv channels i0..i0+15, i0+16..i0+31
};
template <int KN>
KOKKOS_FORCEINLINE_FUNCTION void dkv_step(DkvTile& r, const float* pt, const float* ta, const float* qt,
                                          const float* dt) {
  __m512 q0 = _mm512_loadu_ps(qt), q1 = _mm512_loadu_ps(qt + 16);
  __m512 d0 = _mm512_loadu_ps(dt), d1 = _mm512_loadu_ps(dt + 16);
  asm("" : "+v"(q0), "+v"(q1), "+v"(d0), "+v"(d1));  // in registers: GCC would fold them into each FMA
  for (int k = 0; k < KN; ++k) {
    const __m512 p = _mm512_set1_ps(pt[k]), a = _mm512_set1_ps(ta[k]);
    r.k0[k] = _mm512_fmadd_ps(p, q0, r.k0[k]);
    r.k1[k] = _mm512_fmadd_ps(p, q1, r.k1[k]);
    r.v0[k] = _mm512_fmadd_ps(a, d0, r.v0[k]);
    r.v1[k] = _mm512_fmadd_ps(a, d1, r.v1[k]);
  }
}
[[gnu::noinline]] void dkv_tile(const float* pt, int ldp, const float* ta, int lda, const float* qt, int ldq,
                                const float* dt, int ldd, int s0, int T, int i0, float* const (&dk)[4],
                                float* const (&dv)[4]) {
  DkvTile r;
  dkv_step<1>(r, pt, ta, qt, dt);  // the triangle: query s0 + k is the first that key k takes
  dkv_step<2>(r, pt += ldp, ta += lda, qt += ldq, dt += ldd);
  dkv_step<3>(r, pt += ldp, ta += lda, qt += ldq, dt += ldd);
  for (int t = s0 + 3; t < T; ++t) dkv_step<4>(r, pt += ldp, ta += lda, qt += ldq, dt += ldd);
  for (int k = 0; k < 4; ++k) {
    _mm512_storeu_ps(dk[k] + i0, r.k0[k]);
    _mm512_storeu_ps(dk[k] + i0 + 16, r.k1[k]);
    _mm512_storeu_ps(dv[k] + i0, r.v0[k]);
    _mm512_storeu_ps(dv[k] + i0 + 16, r.v1[k]);
  }
}
#endif

// For the key rows s0 + k (k < nk) and channels i0..i0+W-1, over the queries t = s0+k..T-1:
//   dk[k][i0 + j] = fma chain of dp[t*ldp + s0+k] * qm[t*ldq + i0 + j], starting from 0,
//   dv[k][i0 + j] = fma chain of at[t*lda + s0+k] * dm[t*ldd + i0 + j], starting from 0.
// The triangle t = s0..s0+nk-2 comes first, then the range shared by all keys of the tile.
// kFull: nk == KeyRows, so key k's column is s0 + k without the clamp (inside the shared loop the
// clamps had been recomputed every step, out of registers).
template <int W, bool kFull, class Real>
KOKKOS_INLINE_FUNCTION void cols_chunk(const Real* dp, int ldp, const Real* at, int lda, const Real* qm, int ldq,
                                       const Real* dm, int ldd, int s0, int nk, int T, int i0,
                                       Real* const (&dk)[Tile<Real>::kKeyRows],
                                       Real* const (&dv)[Tile<Real>::kKeyRows]) {
  constexpr int KT = Tile<Real>::kKeyRows;
#ifdef MINIPIPE_HOST_AVX512
  if constexpr (std::is_same<Real, float>::value && W == 32 && kFull && KT == 4) {  // see dkv_tile
    dkv_tile(dp + static_cast<std::size_t>(s0) * ldp + s0, ldp, at + static_cast<std::size_t>(s0) * lda + s0, lda,
             qm + static_cast<std::size_t>(s0) * ldq + i0, ldq, dm + static_cast<std::size_t>(s0) * ldd + i0, ldd, s0,
             T, i0, dk, dv);
    return;
  }
#endif
  Real ak[KT][W], av[KT][W];
  for (int k = 0; k < KT; ++k)
    for (int j = 0; j < W; ++j) ak[k][j] = av[k][j] = 0;
  for (int t = s0; t < s0 + nk - 1; ++t) {
    const Real* qt = qm + static_cast<std::size_t>(t) * ldq + i0;
    const Real* dt = dm + static_cast<std::size_t>(t) * ldd + i0;
    for (int k = 0; k < KT; ++k) {
      if (k > t - s0) continue;
      const Real p = dp[static_cast<std::size_t>(t) * ldp + s0 + k];
      const Real a = at[static_cast<std::size_t>(t) * lda + s0 + k];
      for (int j = 0; j < W; ++j) {
        ak[k][j] = fma_exact(p, qt[j], ak[k][j]);
        av[k][j] = fma_exact(a, dt[j], av[k][j]);
      }
    }
  }
  for (int t = s0 + nk - 1; t < T; ++t) {
    const Real* qt = qm + static_cast<std::size_t>(t) * ldq + i0;
    const Real* dt = dm + static_cast<std::size_t>(t) * ldd + i0;
    for (int k = 0; k < KT; ++k) {
      const int col = s0 + (kFull || k < nk ? k : nk - 1);  // keys k >= nk repeat a valid one; never stored
      const Real p = dp[static_cast<std::size_t>(t) * ldp + col];
      const Real a = at[static_cast<std::size_t>(t) * lda + col];
      for (int j = 0; j < W; ++j) {
        ak[k][j] = fma_exact(p, qt[j], ak[k][j]);
        av[k][j] = fma_exact(a, dt[j], av[k][j]);
      }
    }
  }
  for (int k = 0; k < KT; ++k) {
    if (k >= nk) continue;
    for (int j = 0; j < W; ++j) {
      dk[k][i0 + j] = ak[k][j];
      dv[k][i0 + j] = av[k][j];
    }
  }
}

template <bool kFull, class Real>
KOKKOS_INLINE_FUNCTION void cols_accumulate_keys(const Real* dp, int ldp, const Real* at, int lda, const Real* qm,
                                                 int ldq, const Real* dm, int ldd, int s0, int nk, int T, int n,
                                                 Real* const (&dk)[Tile<Real>::kKeyRows],
                                                 Real* const (&dv)[Tile<Real>::kKeyRows]) {
  constexpr int W = Tile<Real>::kChan;
  int i = 0;
  for (; i + W <= n; i += W) cols_chunk<W, kFull>(dp, ldp, at, lda, qm, ldq, dm, ldd, s0, nk, T, i, dk, dv);
  if (i + W / 2 <= n) {
    cols_chunk<W / 2, kFull>(dp, ldp, at, lda, qm, ldq, dm, ldd, s0, nk, T, i, dk, dv);
    i += W / 2;
  }
  if (i + W / 4 <= n) {
    cols_chunk<W / 4, kFull>(dp, ldp, at, lda, qm, ldq, dm, ldd, s0, nk, T, i, dk, dv);
    i += W / 4;
  }
  for (; i < n; ++i) cols_chunk<1, kFull>(dp, ldp, at, lda, qm, ldq, dm, ldd, s0, nk, T, i, dk, dv);
}
template <class Real>
KOKKOS_INLINE_FUNCTION void cols_accumulate(const Real* dp, int ldp, const Real* at, int lda, const Real* qm, int ldq,
                                            const Real* dm, int ldd, int s0, int nk, int T, int n,
                                            Real* const (&dk)[Tile<Real>::kKeyRows],
                                            Real* const (&dv)[Tile<Real>::kKeyRows]) {
  if (nk == Tile<Real>::kKeyRows)
    cols_accumulate_keys<true>(dp, ldp, at, lda, qm, ldq, dm, ldd, s0, nk, T, n, dk, dv);
  else
    cols_accumulate_keys<false>(dp, ldp, at, lda, qm, ldq, dm, ldd, s0, nk, T, n, dk, dv);
}
#endif  // MINIPIPE_ATTENTION_HOST_TEAMS
}  // namespace

#ifdef MINIPIPE_ATTENTION_HOST_TEAMS
// One team per (b, h) of the host path's attention (see forward).
template <class Real>
struct HostForward {
  static constexpr int kBufKeys = int(16384 / sizeof(Real) / Tile<Real>::kQueries);  // keys of sbuf (16 KB)
  int T, C, H, hs, Tp, level, n_scratch, ldq, lda, ldo, nteams;
  bool fast;  // fast mode: softmax_rows' fast exp and division
  Real scale;
  const Real* qkv_p;
  Real* att_p;
  Real* out_p;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    constexpr int QT = Tile<Real>::kQueries, KW = Tile<Real>::kKeys;
    // one team per (b, h)
    const int b = team::league(tm) / H;
    const int h = team::league(tm) % H;
    Real* kt = team::scratch_ptr<Real>(tm, level, n_scratch);                 // (hs, Tp)
    const Real* qb = qkv_p + static_cast<std::size_t>(b) * T * ldq + h * hs;  // q of (b, t=0, h)
    const Real* kb = qb + C;
    const Real* vb = qb + 2 * C;
    Real* ab = att_p + static_cast<std::size_t>(b * H + h) * T * lda;  // att row (b, h, t=0)
    stage_transposed(tm, kb, ldq, T, hs, kt, Tp);
    team::barrier(tm);
    // Each thread runs its query blocks in turn (one thread a team on host backends), so that a
    // block's att rows can go out during the next block's compute (PendingRows).
    const int nblk = (T + QT - 1) / QT, nth = team::size(tm);
    team::threads(tm, nth, [&](const int tid) {
      alignas(64) Real sbuf[2][QT * kBufKeys];  // this block's and the previous block's
      PendingRows<Real> pending;
      for (int blk = tid, j = 0; blk < nblk; blk += nth, ++j) {
        const int t0 = blk * QT;  // query rows t0..t0+nq-1
        const int nq = T - t0 < QT ? T - t0 : QT;
        const Real* qrow[QT];
        const Real* arow[QT];
        Real* orow[QT];
        for (int q = 0; q < QT; ++q) {
          const int t = t0 + (q < nq ? q : nq - 1);
          qrow[q] = qb + static_cast<std::size_t>(t) * ldq;
          orow[q] = out_p + static_cast<std::size_t>(b * T + t) * ldo + h * hs;
        }
        if (t0 + QT < T) {  // the next block's q and v rows
          const int nn = T - t0 - QT < QT ? T - t0 - QT : QT;
          prefetch_rows(qb + static_cast<std::size_t>(t0 + QT) * ldq, ldq, nn, hs, false);
          prefetch_rows(vb + static_cast<std::size_t>(t0 + QT) * ldq, ldq, nn, hs, false);
        }
        if (team::league(tm) + 1 < nteams) {  // the next team's k rows (its staging)
          const int b2 = (team::league(tm) + 1) / H, h2 = (team::league(tm) + 1) % H;
          prefetch_rows(qkv_p + static_cast<std::size_t>(b2 * T + t0) * ldq + C + h2 * hs, ldq, nq, hs, false);
        }
        // The block's scores, softmax and P of P v live in sbuf (in L1) where it holds Tp keys, and
        // go to att once final (PendingRows); else they are formed in att itself.
        const bool buffered = Tp <= kBufKeys;
        Real* sb = buffered ? sbuf[j & 1] : ab + static_cast<std::size_t>(t0) * lda;
        const int lds = buffered ? Tp : lda, width = buffered ? Tp : T;
        for (int q = 0; q < QT; ++q) arow[q] = sb + static_cast<std::size_t>(q < nq ? q : nq - 1) * lds;
        // scores of the unmasked keys t2 <= t, kept in sb until normalised
        for (int k0 = 0; k0 < t0 + nq; k0 += KW) {
          Real acc[QT][KW];
          dot_tile(qrow, kt + k0, Tp, hs, acc);
          pending.one();
          // A tile inside the rows is stored whole, also where it crosses the diagonal: softmax_rows
          // reads only the keys t2 <= t (and overwrites the rest with zeros in att), and whole-vector
          // stores replace a compare and a scalar store per element (a tenth of the kernel).
          if (k0 + KW <= width) {
            for (int q = 0; q < QT; ++q) {  // constant indices keep acc in registers
              if (q >= nq) continue;
              Real* ar = sb + static_cast<std::size_t>(q) * lds + k0;
              for (int j2 = 0; j2 < KW; ++j2) ar[j2] = acc[q][j2] * scale;
            }
            continue;
          }
          for (int q = 0; q < QT; ++q) {  // constant indices keep acc in registers
            if (q >= nq) continue;
            Real* ar = sb + static_cast<std::size_t>(q) * lds;
            for (int j2 = 0; j2 < KW; ++j2)
              if (k0 + j2 <= t0 + q) ar[k0 + j2] = acc[q][j2] * scale;
          }
        }
        softmax_rows(sb, lds, t0, nq, width, !buffered, fast, pending);
        pending.rest();  // sbuf[(j + 1) & 1] is the next block's
        rows_accumulate(arow, vb, ldq, t0, nq, hs, orow);
        if (buffered) pending = PendingRows<Real>{sb, ab + static_cast<std::size_t>(t0) * lda, lds, lda, t0, nq, T, 0};
      }
      pending.rest();
    });
#ifdef MINIPIPE_HOST_AVX512
    _mm_sfence();  // the streaming stores of store_att_row before any later read of att
#endif
  }
};

// One team per (b, h) of the host path's attention (see backward_input).
template <class Real>
struct HostBackward {
  int T, C, H, hs, Tp, level, n_scratch, ldq, lda, ldd, ldg, nteams;
  Real scale;
  const Real* qkv_p;
  const Real* att_p;
  const Real* dout_p;
  Real* g_p;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    constexpr int QT = Tile<Real>::kQueries, KW = Tile<Real>::kKeys, KT = Tile<Real>::kKeyRows;
    // one team per (b, h)
    const int b = team::league(tm) / H;
    const int h = team::league(tm) % H;
    Real* vt = team::scratch_ptr<Real>(tm, level, n_scratch);  // (hs, Tp)
    Real* dp = vt + hs * Tp;                                   // (T, Tp)
    const std::size_t row0 = static_cast<std::size_t>(b) * T;  // token row of (b, t=0)
    const Real* qb = qkv_p + row0 * ldq + h * hs;
    const Real* kb = qb + C;
    const Real* vb = qb + 2 * C;
    const Real* ab = att_p + static_cast<std::size_t>(b * H + h) * T * lda;
    const Real* db = dout_p + row0 * ldd + h * hs;
    Real* gq = g_p + row0 * ldg + h * hs;
    stage_transposed(tm, vb, ldq, T, hs, vt, Tp);
    team::barrier(tm);
    // dpre rows: datt tiles, then rowdot and dpre per row in t2 order
    team::threads(tm, (T + QT - 1) / QT, [&](const int blk) {
      const int t0 = blk * QT;
      const int nq = T - t0 < QT ? T - t0 : QT;
      const Real* drow[QT];
      for (int q = 0; q < QT; ++q) drow[q] = db + static_cast<std::size_t>(t0 + (q < nq ? q : nq - 1)) * ldd;
      if (t0 + QT < T) {  // the next block's dout rows and att rows
        const int nn = T - t0 - QT < QT ? T - t0 - QT : QT;
        prefetch_rows(db + static_cast<std::size_t>(t0 + QT) * ldd, ldd, nn, hs, false);
        prefetch_rows(ab + static_cast<std::size_t>(t0 + QT) * lda, lda, nn, t0 + QT + nn, false);
      }
      // This block's rows of what the later phases first touch: q (dk), k (dq), and the dqkv rows
      // they write; and the next team's v rows (its staging). Fetched here, they arrive while this
      // phase computes, where the dk/dv and dq loops would wait on each miss in turn.
      prefetch_rows(qb + static_cast<std::size_t>(t0) * ldq, ldq, nq, hs, false);
      prefetch_rows(kb + static_cast<std::size_t>(t0) * ldq, ldq, nq, hs, false);
      for (int g = 0; g < 3; ++g) prefetch_rows(gq + static_cast<std::size_t>(t0) * ldg + g * C, ldg, nq, hs, true);
      if (team::league(tm) + 1 < nteams) {
        const int b2 = (team::league(tm) + 1) / H, h2 = (team::league(tm) + 1) % H;
        prefetch_rows(qkv_p + static_cast<std::size_t>(b2 * T + t0) * ldq + 2 * C + h2 * hs, ldq, nq, hs, false);
      }
      for (int k0 = 0; k0 < t0 + nq; k0 += KW) {
        Real acc[QT][KW];
        dot_tile(drow, vt + k0, Tp, hs, acc);
        for (int q = 0; q < QT; ++q) {  // constant indices keep acc in registers
          if (q >= nq) continue;
          // Whole tiles (dp rows are Tp wide): the keys past t are never read.
          Real* pr = dp + (t0 + q) * Tp + k0;
          for (int j = 0; j < KW; ++j) pr[j] = acc[q][j];
        }
      }
      for (int q = 0; q < nq; ++q) {
        const int t = t0 + q;
        const Real* ar = ab + static_cast<std::size_t>(t) * lda;
        Real* pr = dp + t * Tp;
        const Real rd = row_dot(ar, pr, t + 1);
        for (int t2 = 0; t2 <= t; ++t2) pr[t2] = (ar[t2] * (pr[t2] - rd)) * scale;
      }
    });
    team::barrier(tm);
    // dk, dv: key rows s0..s0+nk-1, sums over the queries t >= key
    team::threads(tm, (T + KT - 1) / KT, [&](const int blk) {
      const int s0 = blk * KT;
      const int nk = T - s0 < KT ? T - s0 : KT;
      Real* dk[KT];
      Real* dv[KT];
      for (int k = 0; k < KT; ++k) {
        dk[k] = gq + static_cast<std::size_t>(s0 + (k < nk ? k : nk - 1)) * ldg + C;
        dv[k] = dk[k] + C;
      }
      cols_accumulate(dp, Tp, ab, lda, qb, ldq, db, ldd, s0, nk, T, hs, dk, dv);
    });
    // dq: query rows, sums over the keys t2 <= query
    team::threads(tm, (T + QT - 1) / QT, [&](const int blk) {
      const int t0 = blk * QT;
      const int nq = T - t0 < QT ? T - t0 : QT;
      const Real* prow[QT];
      Real* grow[QT];
      for (int q = 0; q < QT; ++q) {
        const int t = t0 + (q < nq ? q : nq - 1);
        prow[q] = dp + t * Tp;
        grow[q] = gq + static_cast<std::size_t>(t) * ldg;
      }
      rows_accumulate(prow, kb, ldq, t0, nq, hs, grow);
    });
  }
};
#endif  // MINIPIPE_ATTENTION_HOST_TEAMS

template <class Real>
void Attention<Real>::forward(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att, Mat<Real> out) {
  check_shapes("Attention::forward", B, T, C, H, qkv.extent(0), qkv.extent(1), att.extent(0), att.extent(1),
               out.extent(0), out.extent(1));
  // Causal: query t meets t+1 keys. q k^T and P v: 2 (t+1) C FLOPs each per token (the FOM's
  // model); softmax (scale, max, exp, sum, divide): 5 FLOPs a kept score.
  const double pairs = double(B) * T * (T + 1) / 2, sz = sizeof(Real);
  counters::WorkScope work("Attention::forward", 4.0 * pairs * C + 5.0 * pairs * H, sz * (4.0 * B * T * C + pairs * H),
                           4.0 * pairs * C);
  if (use_device_path() && attention_device::fits<Real>(C / H)) {  // both modes: the same chains
    attention_device::forward<Real>(B, T, C, H, qkv, att, out);
    return;
  }
#ifdef MINIPIPE_ATTENTION_HOST_TEAMS
  const int hs = C / H;
  const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs));
  constexpr int KW = Tile<Real>::kKeys;
  const int Tp = round_up(T, KW);  // K^T rows padded with zeros to whole key tiles
  const int n_scratch = hs * Tp;   // K^T of the head (hs, Tp)
  const std::size_t bytes = Scratch<Real>::shmem_size(n_scratch);
  const team::Shape shape = host_team_shape(team::launch_target(), B * H, bytes);
  if (shape.level < 0) {  // the canonical order's own row kernels
    attention_order::forward<Real>("Attention::", B, T, C, H, qkv, att, out);
    return;
  }
  const Real* qkv_p = qkv.data();
  Real* att_p = att.data();
  Real* out_p = out.data();
  const int ldq = static_cast<int>(qkv.stride(0)), lda = static_cast<int>(att.stride(0)),
            ldo = static_cast<int>(out.stride(0));
  team::launch("Attention::forward", shape,
               HostForward<Real>{T, C, H, hs, Tp, shape.level, n_scratch, ldq, lda, ldo, B * H, mode == Mode::fast,
                                 scale, qkv_p, att_p, out_p});
#else
  (void)mode;
  attention_order::forward<Real>("Attention::", B, T, C, H, qkv, att, out);                // see the file's top
#endif
}

template <class Real>
void Attention<Real>::backward_input(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, CMat<Real> att,
                                     CMat<Real> dout, Mat<Real> dqkv) {
  check_shapes("Attention::backward_input", B, T, C, H, qkv.extent(0), qkv.extent(1), att.extent(0), att.extent(1),
               dout.extent(0), dout.extent(1));
  if (dqkv.extent(0) != qkv.extent(0) || dqkv.extent(1) != qkv.extent(1))
    throw std::invalid_argument("Attention::backward_input: dqkv must be (B*T, 3C)");
  // dP = dO v^T, dv = P^T dO, dq = dS k, dk = dS^T q: 8 (t+1) C FLOPs per token (the FOM's model);
  // softmax backward (row dot, dS): 4 FLOPs a kept score. qkv, P and dO read, dqkv written.
  const double pairs = double(B) * T * (T + 1) / 2, sz = sizeof(Real);
  counters::WorkScope work("Attention::backward_input", 8.0 * pairs * C + 4.0 * pairs * H,
                           sz * (7.0 * B * T * C + pairs * H), 8.0 * pairs * C);
  (void)mode;  // no transcendental functions in backward: both modes run the same loops
  if (use_device_path() && attention_device::fits<Real>(C / H)) {
    attention_device::backward_input<Real>(B, T, C, H, qkv, att, dout, dqkv);
    return;
  }
#ifdef MINIPIPE_ATTENTION_HOST_TEAMS
  const int hs = C / H;
  const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs));
  const int rows = B * H * T;
  constexpr int KW = Tile<Real>::kKeys;
  const int Tp = round_up(T, KW);
  const int n_scratch = hs * Tp + T * Tp;  // V^T of the head (hs, Tp), then dpre (T, Tp)
  const std::size_t bytes = Scratch<Real>::shmem_size(n_scratch);
  const team::Shape shape = host_team_shape(team::launch_target(), B * H, bytes);
  if (shape.level < 0) {  // the canonical order's own row kernels
    attention_order::backward_input<Real>("Attention::", B, T, C, H, qkv, att, dout, dqkv);
    return;
  }
  (void)rows;
  const Real* qkv_p = qkv.data();
  const Real* att_p = att.data();
  const Real* dout_p = dout.data();
  Real* g_p = dqkv.data();
  const int ldq = static_cast<int>(qkv.stride(0)), lda = static_cast<int>(att.stride(0)),
            ldd = static_cast<int>(dout.stride(0)), ldg = static_cast<int>(dqkv.stride(0));
  // With datt(t,t2) = dout_t . v_t2 the softmax backward is
  //   dpre(t,t2) = att(t,t2) * (datt(t,t2) - rowdot(t)),  rowdot(t) = sum_t2 att(t,t2) datt(t,t2),
  // and dq_t = scale sum_t2 dpre k_t2, dk_t2 = scale sum_t dpre q_t, dv_t2 = sum_t att dout_t.
  // One team per (b, h): dpre (scale included) of the head goes to scratch once, then every
  // gradient row is owned by one thread (query rows for dq, key rows for dk/dv): no atomics.
  team::launch("Attention::backward_input", shape,
               HostBackward<Real>{T, C, H, hs, Tp, shape.level, n_scratch, ldq, lda, ldd, ldg, B * H, scale, qkv_p,
                                  att_p, dout_p, g_p});
#else
  attention_order::backward_input<Real>("Attention::", B, T, C, H, qkv, att, dout, dqkv);  // see the file's top
#endif
}

template struct Attention<float>;
template struct Attention<double>;

}  // namespace minipipe
