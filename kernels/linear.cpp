// Linear layer kernels: deterministic mode on gemm_det plus exact per-sample accumulation of the
// weight gradient, fast mode on gemm_det or KokkosBlas::gemm (BLAS / cuBLAS through Kokkos Kernels).
#include "linear.hpp"

#include <KokkosBlas3_gemm.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gemm.hpp"
#include "kernel_path.hpp"

namespace minipipe {
namespace {

std::string shape(const char* name, std::size_t r, std::size_t c) {
  return std::string(name) + " (" + std::to_string(r) + "," + std::to_string(c) + ")";
}

[[noreturn]] void shape_error(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("Linear::") + fn + ": shape mismatch: " + what);
}

// Upper bound on the per-sample partials held at once (more samples per pass over the exact
// accumulators, bounded memory).
constexpr std::size_t kPartialBytes = std::size_t(64) << 20;

// Exact addition of nb per-sample partials (ws holds nb batches of OI elements) into the dW
// accumulators. Generic (double partials): one from_double + add per value.
template <class T>
struct DwAddExact {
  static void run(const ExactTarget& wt, const T* ws, std::size_t OI, int nb) {
    Kokkos::parallel_for(
        "Linear::dW_add_exact", Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(OI)),
        KOKKOS_LAMBDA(const std::int64_t e) {
          for (int b = 0; b < nb; ++b) wt.add(e, static_cast<double>(ws[b * OI + e]));
        });
  }
};

// Elements per work item of the float path: a contiguous block per host thread so the loop over
// lanes vectorizes; one element per thread on GPUs (loads coalesce across threads).
constexpr int kExactLanes = std::is_same<ExecSpace::memory_space, Kokkos::HostSpace>::value ? 16 : 1;

// Float partials: every value becomes a signed limb word (no 128-bit conversion), up to
// ExactSum::kMaxLimbAdds of them are summed per limb in int64 without overflow, and each such
// chunk is folded into the Fixed128 accumulator once with ExactSum::add_limbs. Integer addition
// is associative, so the accumulated bits equal those of from_double + add per value.
// Overflow rule: flagged when any value is non-finite or |v| >= 2^46 (as from_double), or when
// the exact running total leaves the 128-bit range at a chunk fold (detected exactly there).
template <>
struct DwAddExact<float> {
  static void run(const ExactTarget& wt, const float* ws, std::size_t OI, int nb) {
    constexpr int L = kExactLanes;
    constexpr int C = ExactSum::kMaxLimbAdds;
    const std::int64_t nblk = static_cast<std::int64_t>((OI + L - 1) / L);
    const float* const data = ws;
    Kokkos::parallel_for(
        "Linear::dW_add_exact", Kokkos::RangePolicy<ExecSpace>(0, nblk), KOKKOS_LAMBDA(const std::int64_t blk) {
          const std::size_t e0 = static_cast<std::size_t>(blk) * L;
          const int n = OI - e0 < static_cast<std::size_t>(L) ? static_cast<int>(OI - e0) : L;
          std::int64_t a0[L], a1[L], a2[L], a3[L], bad[L];
          for (int l = 0; l < L; ++l) a0[l] = a1[l] = a2[l] = a3[l] = bad[l] = 0;
          int ov = 0;
          for (int c0 = 0; c0 < nb; c0 += C) {
            const int c1 = nb - c0 < C ? nb : c0 + C;
            if (n == L) {
              for (int b = c0; b < c1; ++b) ExactSum::limb_accumulate<L>(data + b * OI + e0, L, a0, a1, a2, a3, bad);
            } else {
              for (int b = c0; b < c1; ++b) ExactSum::limb_accumulate<L>(data + b * OI + e0, n, a0, a1, a2, a3, bad);
            }
            for (int l = 0; l < n; ++l) {
              const std::int64_t a[ExactSum::kLimbs] = {a0[l], a1[l], a2[l], a3[l]};
              ExactSum::add_limbs(wt.exact(e0 + l), a, ov);
              a0[l] = a1[l] = a2[l] = a3[l] = 0;
            }
          }
          for (int l = 0; l < n; ++l) ov |= bad[l] != 0 ? 1 : 0;
          if (ov) wt.overflow() = 1;
        });
  }
};

// gemm_det_exact exists for float only; the double instantiation never takes that branch.
// Into dW's accumulators (exact_target_overwrite), recording when the call also stored the floats
// that finalize would form (GradAccum::floats_stored).
template <class T>
void gemm_det_exact_any(KernelWorkspace& ws, int M, int N, int K, int S, StridedMat<T> A, std::ptrdiff_t a_step,
                        StridedMat<T> B, std::ptrdiff_t b_step, const GradAccum<T>& dW,
                        const ExactTarget* row_target = nullptr) {
  if constexpr (std::is_same<T, float>::value) {
    if (gemm_det_exact(ws, GemmOptions{}, M, N, K, S, A, a_step, B, b_step, dW.exact_target_overwrite(S), row_target))
      dW.floats_stored();
  } else {
    throw std::logic_error("gemm_det_exact_any: float only");
  }
}

// Adds the samples held in dW.pending (gemm_det_exact over all of them) and empties it.
// "Linear::forward (192x64)": the kernel label with its weight's [out x in], so each weight
// shape is one point of the roofline.
std::string weight_label(const char* kernel, int O, int I) {
  return std::string(kernel) + " (" + std::to_string(O) + "x" + std::to_string(I) + ")";
}

template <class T>
void fast_weight(CMat<T> x, CMat<T> dy, GradAccum<T>& dW, GradAccum<T>* db, KernelWorkspace& ws);

template <class T>
void add_held(GradAccum<T>& dW, KernelWorkspace& ws) {
  PendingSamples<T>& p = dW.pending;
  if (p.count == 0) return;
  const int n = p.count;
  p.count = 0;  // emptied first: a throwing add must not leave the samples to be added twice
  // The held samples' dW GEMM (2 rows I O FLOPs, the FOM's model) is counted here, where it runs;
  // the calls that held the samples counted their copies and bias sums only (nothing by reference).
  const double rows = double(n) * p.rows, nio = rows * p.in * p.out, sz = sizeof(T);
  const bool bias = p.reference && p.bias;
  counters::WorkScope work(counters::counting() ? weight_label("Linear::backward_weight", p.out, p.in).c_str() : "",
                           2 * nio + (bias ? rows * p.out : 0.0),
                           sz * (rows * p.in + rows * p.out + 2.0 * p.in * p.out + (bias ? 2.0 * p.out : 0.0)),
                           2 * nio);
  const std::ptrdiff_t xs = static_cast<std::ptrdiff_t>(p.rows) * p.in,
                       dys = static_cast<std::ptrdiff_t>(p.rows) * p.out;
  if (!p.reference) {
    gemm_det_exact_any(ws, p.out, p.in, p.rows, n, transposed(p.dy.data(), p.out), dys, row_major(p.x.data(), p.in), xs,
                       dW);
    return;
  }
  // The caller's rows: one call over all held samples, the bias chains fused as in a direct call.
  if (dW.mode == Mode::fast) {
    fast_weight(CMat<T>(p.ref_x, static_cast<std::size_t>(n) * p.rows, p.in),
                CMat<T>(p.ref_dy, static_cast<std::size_t>(n) * p.rows, p.out), dW, p.bias, ws);
    return;
  }
  const ExactTarget bt = bias ? p.bias->exact_target() : ExactTarget{};
  gemm_det_exact_any(ws, p.out, p.in, p.rows, n, transposed(p.ref_dy, p.out), dys, row_major(p.ref_x, p.in), xs, dW,
                     bias ? &bt : nullptr);
}

// Holds the S samples (Tr rows each) of x (N,I) and dy (N,O) by reference (PendingSamples): they
// extend the held ones when they are the rows right after them, else the held ones are added
// first. Deterministic: adds when `group` samples are held (group 0: only at the flush).
template <class T>
void hold_reference(GradAccum<T>& dW, GradAccum<T>* db, CMat<T> x, CMat<T> dy, int Tr, int S, int group,
                    KernelWorkspace& ws) {
  PendingSamples<T>& p = dW.pending;
  const int I = static_cast<int>(x.extent(1)), O = static_cast<int>(dy.extent(1));
  const std::size_t held = static_cast<std::size_t>(p.count) * Tr;
  const bool continues = p.count > 0 && p.rows == Tr && p.in == I && p.out == O && p.bias == db &&
                         x.data() == p.ref_x + held * I && dy.data() == p.ref_dy + held * O &&
                         (group == 0 || p.count + S <= group);
  if (!continues) {
    add_held(dW, ws);
    p.ref_x = x.data();
    p.ref_dy = dy.data();
    p.rows = Tr;
    p.in = I;
    p.out = O;
    p.bias = db;
  }
  p.count += S;
  if (group > 0 && p.count >= group) add_held(dW, ws);
}

// A column block of db: db(o) += sum over samples of [sum over the sample's rows in order], o in
// [o0, o0 + kBiasLanes). Rows are read contiguously (the lane loop vectorizes) and each lane keeps
// the per-element order of the one-thread-per-column loop it replaces.
constexpr int kBiasLanes = 64;

// The bias chain, the one order of every bias gradient (docs/design.md §4 rule 1): for the columns
// o0 + l, l < no <= L, acc[l] = acc[l] + dy(r, o0 + l) for the rows r = r0 .. r1-1 in order.
// seen(r, l, v) sees each value as it is read (hold_samples copies it on the way).
template <int L, class T, class Seen>
KOKKOS_INLINE_FUNCTION void bias_chain(const T* dy, std::ptrdiff_t ldy, std::ptrdiff_t r0, std::ptrdiff_t r1, int o0,
                                       int no, T (&acc)[L], const Seen& seen) {
  for (std::ptrdiff_t r = r0; r < r1; ++r)
    for (int l = 0; l < no; ++l) {
      const T v = dy[r * ldy + o0 + l];
      seen(r, l, v);
      acc[l] = acc[l] + v;
    }
}
struct Unseen {
  template <class T>
  KOKKOS_INLINE_FUNCTION void operator()(std::ptrdiff_t, int, T) const {}
};

// Deterministic db: per sample s < S (Tr rows each) the bias chain from zero, each added exactly
// (bt != nullptr; else only seen runs).
template <int L, class T, class Seen = Unseen>
KOKKOS_INLINE_FUNCTION void bias_samples_exact(const T* dy, std::ptrdiff_t ldy, int S, int Tr, int o0, int no,
                                               const ExactTarget* bt, const Seen& seen = Seen()) {
  for (int s = 0; s < S; ++s) {
    T acc[L] = {};  // this sample's partial, t in order
    bias_chain<L>(dy, ldy, static_cast<std::ptrdiff_t>(s) * Tr, static_cast<std::ptrdiff_t>(s + 1) * Tr, o0, no, acc,
                  seen);
    if (bt)
      for (int l = 0; l < no; ++l) bt->add(o0 + l, static_cast<double>(acc[l]));
  }
}

// Copies the S samples (Tr rows each) of x (N,I) and dy (N,O) behind those held in dW.pending,
// adding the held ones first when they would not fit and when the group is full. With bt, adds
// the bias sums of the samples (db_add_exact's chains) from the dy values as they are copied.
template <class T>
void hold_samples(GradAccum<T>& dW, CMat<T> x, CMat<T> dy, int Tr, int S, int group, KernelWorkspace& ws,
                  const ExactTarget* bt) {
  PendingSamples<T>& p = dW.pending;
  const int I = static_cast<int>(x.extent(1)), O = static_cast<int>(dy.extent(1));
  if (p.count > 0 && (p.rows != Tr || p.in != I || p.out != O))
    throw std::logic_error("Linear::backward_weight: accumulator '" + dW.name + "' holds samples of " +
                           std::to_string(p.rows) + " rows, this call has " + std::to_string(Tr));
  if (p.count + S > group) add_held(dW, ws);
  const std::size_t rows = static_cast<std::size_t>(group) * Tr;
  if (p.x.extent(0) < rows * I || p.dy.extent(0) < rows * O) {
    p.x = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "Linear::held_x::" + dW.name), rows * I);
    p.dy = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "Linear::held_dy::" + dW.name), rows * O);
  }
  p.capacity = group;
  p.rows = Tr;
  p.in = I;
  p.out = O;
  T* const hx = p.x.data() + static_cast<std::size_t>(p.count) * Tr * I;
  T* const hdy = p.dy.data() + static_cast<std::size_t>(p.count) * Tr * O;
  const std::ptrdiff_t ldx = x.stride(0), ldy = dy.stride(0);
  const T* const xs = x.data();
  const T* const dys = dy.data();
  Kokkos::parallel_for(
      "Linear::dW_hold", Kokkos::RangePolicy<ExecSpace>(0, S * Tr), KOKKOS_LAMBDA(const int r) {
        for (int i = 0; i < I; ++i) hx[static_cast<std::ptrdiff_t>(r) * I + i] = xs[r * ldx + i];
      });
  // dy by column blocks, each sample's rows in order: the bias chains run on the values copied.
  const ExactTarget b = bt ? *bt : ExactTarget{};
  const bool sums = bt != nullptr;
  Kokkos::parallel_for(
      "Linear::dW_hold_dy", Kokkos::RangePolicy<ExecSpace>(0, (O + kBiasLanes - 1) / kBiasLanes),
      KOKKOS_LAMBDA(const int blk) {
        const int o0 = blk * kBiasLanes;
        const int no = O - o0 < kBiasLanes ? O - o0 : kBiasLanes;
        bias_samples_exact<kBiasLanes>(dys, ldy, S, Tr, o0, no, sums ? &b : nullptr,
                                       [&](std::ptrdiff_t r, int l, T v) { hdy[r * O + o0 + l] = v; });
      });
  fence_host_threads(ExecSpace(), "Linear::dW_hold");  // host path only
  p.count += S;
  if (p.count == group) add_held(dW, ws);
}

// Fast mode's backward-weight over the N rows of x (N,I) and dy (N,O): dW and db sums (see
// Linear::backward_weight), one call whether the rows are one micro-batch's or all held ones.
template <class T>
void fast_weight(CMat<T> x, CMat<T> dy, GradAccum<T>& dW, GradAccum<T>* db, KernelWorkspace& ws) {
  const int N = static_cast<int>(x.extent(0)), I = static_cast<int>(x.extent(1));
  const int O = static_cast<int>(dy.extent(1));
  const std::ptrdiff_t ldx = x.stride(0), ldy = dy.stride(0);
  const int nob = (O + kBiasLanes - 1) / kBiasLanes;
  if (fast_gemm_on_gemm_det()) {
    // dW(o,i) += sum_n dy(n,o) x(n,i) as one chain over all N rows that starts from the sum
    // (chain_on_c: no copy of the old sum, which accumulate needs when N spans several k-blocks).
    // db(o) += the chain over n of dy(n,o), db_fast's below, formed from the packed dy^T panels.
    if (db) {
      gemm_det_row_sums<T>(ws, GemmOptions{}, O, I, N, transposed(dy.data(), ldy), row_major(x.data(), ldx),
                           dW.sum.data(), I, GemmOut::chain_on_c, db->sum.data());
      return;
    }
    gemm_det<T>(ws, O, I, N, transposed(dy.data(), ldy), row_major(x.data(), ldx), dW.sum.data(), I, nullptr,
                GemmOut::chain_on_c);
  } else {
    Mat<T> dWm(dW.sum.data(), O, I);
    KokkosBlas::gemm("T", "N", T(1), dy, x, T(1), dWm);
  }
  if (db) {
    auto s = db->sum;
    const T* dys = dy.data();
    Kokkos::parallel_for(
        "Linear::db_fast", Kokkos::RangePolicy<ExecSpace>(0, nob), KOKKOS_LAMBDA(const int blk) {
          const int o0 = blk * kBiasLanes;
          const int no = O - o0 < kBiasLanes ? O - o0 : kBiasLanes;
          T acc[kBiasLanes] = {};  // one chain over all N rows
          bias_chain<kBiasLanes>(dys, ldy, 0, N, o0, no, acc, Unseen());
          for (int l = 0; l < no; ++l) s(o0 + l) += acc[l];
        });
  }
}

template <class T>
void check_accum(const char* what, const GradAccum<T>& g, Mode mode, std::size_t n) {
  if (g.mode != mode)
    throw std::invalid_argument(std::string("Linear::backward_weight: ") + what + " accumulator '" + g.name +
                                "' is in " + to_string(g.mode) + " mode but the call is " + to_string(mode));
  if (g.size() != n)
    throw std::invalid_argument(std::string("Linear::backward_weight: ") + what + " accumulator '" + g.name + "' has " +
                                std::to_string(g.size()) + " elements, expected " + std::to_string(n));
}

}  // namespace

template <class T>
void Linear<T>::forward(Mode mode, CMat<T> x, CMat<T> W, CVec<T> b, Mat<T> y, KernelWorkspace& ws, PackedB<T>* packed) {
  const int N = static_cast<int>(x.extent(0)), I = static_cast<int>(x.extent(1));
  const int O = static_cast<int>(W.extent(0));
  if (W.extent(1) != x.extent(1) || y.extent(0) != x.extent(0) || y.extent(1) != W.extent(0) ||
      (b.extent(0) != 0 && b.extent(0) != W.extent(0)))
    shape_error("forward", shape("x", N, I) + ", " + shape("W", W.extent(0), W.extent(1)) + ", b (" +
                               std::to_string(b.extent(0)) + "), " + shape("y", y.extent(0), y.extent(1)));
  ProfileRegion region("Linear::forward");
  const bool has_bias = b.extent(0) != 0;
  // 2 N O I FLOPs (the FOM's model) plus the bias; x, W (and b) read once, y written once.
  const double nio = double(N) * I * O, sz = sizeof(T);
  counters::WorkScope work(counters::counting() ? weight_label("Linear::forward", O, I).c_str() : "",
                           2 * nio + (has_bias ? double(N) * O : 0.0),
                           sz * (double(N) * I + double(O) * I + double(N) * O + (has_bias ? O : 0)), 2 * nio);
  if (mode == Mode::deterministic || fast_gemm_on_gemm_det()) {
    // y(n,o) = sum_i x(n,i) W(o,i): B(k=i, n=o) is W read transposed; bias in the epilogue.
    gemm_det<T>(ws, N, O, I, row_major(x.data(), x.stride(0)), transposed(W.data(), W.stride(0)), y.data(), y.stride(0),
                has_bias ? b.data() : nullptr, GemmOut::overwrite, packed);
    return;
  }
  if (has_bias) {  // y = b row by row (contiguous stores), then y += x W^T in the BLAS call (beta = 1)
    Kokkos::parallel_for(
        "Linear::bias_fill", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const int n) {
          for (int o = 0; o < O; ++o) y(n, o) = b(o);
        });
  }
  if (I == 0 && !has_bias) Kokkos::deep_copy(y, T(0));  // KokkosBlas::gemm skips K = 0 entirely
  KokkosBlas::gemm("N", "T", T(1), x, W, has_bias ? T(1) : T(0), y);
}

template <class T>
void Linear<T>::backward_input(Mode mode, CMat<T> dy, CMat<T> W, Mat<T> dx, KernelWorkspace& ws, PackedB<T>* packed) {
  const int N = static_cast<int>(dy.extent(0)), O = static_cast<int>(dy.extent(1));
  const int I = static_cast<int>(W.extent(1));
  if (W.extent(0) != dy.extent(1) || dx.extent(0) != dy.extent(0) || dx.extent(1) != W.extent(1))
    shape_error("backward_input",
                shape("dy", N, O) + ", " + shape("W", W.extent(0), I) + ", " + shape("dx", dx.extent(0), dx.extent(1)));
  ProfileRegion region("Linear::backward_input");
  const double nio = double(N) * I * O, sz = sizeof(T);
  counters::WorkScope work(counters::counting() ? weight_label("Linear::backward_input", O, I).c_str() : "", 2 * nio,
                           sz * (double(N) * O + double(O) * I + double(N) * I), 2 * nio);
  if (mode == Mode::deterministic || fast_gemm_on_gemm_det()) {
    // dx(n,i) = sum_o dy(n,o) W(o,i), o in order.
    gemm_det<T>(ws, N, I, O, row_major(dy.data(), dy.stride(0)), row_major(W.data(), W.stride(0)), dx.data(),
                dx.stride(0), nullptr, GemmOut::overwrite, packed);
    return;
  }
  if (O == 0) Kokkos::deep_copy(dx, T(0));  // KokkosBlas::gemm skips K = 0 entirely
  KokkosBlas::gemm("N", "N", T(1), dy, W, T(0), dx);
}

template <class T>
void Linear<T>::backward_weight(Mode mode, CMat<T> x, CMat<T> dy, int rows_per_sample, GradAccum<T>& dW,
                                GradAccum<T>* db, KernelWorkspace& ws) {
  const int N = static_cast<int>(x.extent(0)), I = static_cast<int>(x.extent(1));
  const int O = static_cast<int>(dy.extent(1));
  if (dy.extent(0) != x.extent(0))
    shape_error("backward_weight", shape("x", N, I) + ", " + shape("dy", dy.extent(0), O));
  if (rows_per_sample <= 0 || N % rows_per_sample != 0)
    throw std::invalid_argument("Linear::backward_weight: rows_per_sample=" + std::to_string(rows_per_sample) +
                                " must be positive and divide the row count " + std::to_string(N));
  check_accum("weight", dW, mode, static_cast<std::size_t>(O) * I);
  if (db) check_accum("bias", *db, mode, static_cast<std::size_t>(O));
  if (N == 0) return;
  ProfileRegion region("Linear::backward_weight");
  const int Tr = rows_per_sample;
  const int S = N / Tr;
  // Where the samples go: held by reference (fast mode, or the deterministic host path short of a
  // group), copied aside (the deterministic host path short of a group), or added now.
  const bool host_exact = mode == Mode::deterministic && std::is_same<T, float>::value &&
                          std::is_same<MemSpace, Kokkos::HostSpace>::value && !use_device_path();
  const int group = host_exact && dW.pending.enabled ? gemm_det_exact_group(Tr) : 0;
  const bool by_reference = dW.pending.enabled && dW.pending.reference && (mode == Mode::fast || (S < group && I > 0));
  const bool copies = !dW.pending.reference && S < group;
  // dW += dy^T x: 2 N O I FLOPs (the FOM's model), db: N O. A call whose samples are held only
  // copies them (or nothing, by reference): add_held counts the GEMM where it runs.
  const double nio = double(N) * I * O, sz = sizeof(T);
  const bool held = by_reference || copies;
  counters::WorkScope work(counters::counting() ? weight_label("Linear::backward_weight", O, I).c_str() : "",
                           held ? (copies && db ? double(N) * O : 0.0) : 2 * nio + (db ? double(N) * O : 0.0),
                           by_reference ? 0.0
                           : copies     ? sz * 2.0 * (double(N) * I + double(N) * O)
                                        : sz * (double(N) * I + double(N) * O + 2.0 * O * I + (db ? 2.0 * O : 0.0)),
                           held ? 0.0 : 2 * nio);
  const std::ptrdiff_t ldx = x.stride(0), ldy = dy.stride(0);
  const int nob = (O + kBiasLanes - 1) / kBiasLanes;

  if (by_reference) {
    hold_reference(dW, db, x, dy, Tr, S, mode == Mode::fast ? 0 : group, ws);
    return;
  }
  if (mode == Mode::fast) {
    fast_weight(x, dy, dW, db, ws);
    return;
  }

  if (host_exact) {
    // The bias sums (the same per-sample chains over t as db_add_exact's below) are formed from
    // values this path reads anyway: the dy copied into held samples, or the packed dy panels.
    const ExactTarget bt = db ? db->exact_target() : ExactTarget{};
    if (copies) {
      hold_samples(dW, x, dy, Tr, S, group, ws, db ? &bt : nullptr);
      return;
    }
    // partial_s(o,i) = sum_{t=0..Tr-1} dy(t,o) x(t,i) for each sample s, added exactly as it leaves
    // the microkernel: A_s = this sample's dy read transposed, B_s = its x.
    const bool fused_db = db && I > 0;
    gemm_det_exact_any(ws, O, I, Tr, S, transposed(dy.data(), ldy), Tr * ldy, row_major(x.data(), ldx), Tr * ldx, dW,
                       fused_db ? &bt : nullptr);
    if (fused_db || !db) return;
  } else {
    // Device path (and double): the partials of a batch of samples (and their bias partials, the
    // row chains of dy^T, formed by the same launch from the dy tiles it reads) come from one
    // batched GEMM launch and are added in one pass over the 16-byte exact accumulators; integer
    // addition is associative, so batching changes no bit.
    const std::size_t OI = static_cast<std::size_t>(O) * I;
    const std::size_t per_sample = OI + (db ? O : 0);
    const int batch = static_cast<int>(std::min<std::size_t>(
        static_cast<std::size_t>(S),
        std::max<std::size_t>(1, kPartialBytes / (std::max<std::size_t>(per_sample, 1) * sizeof(T)))));
    T* const part = ws.get<T>(KernelWorkspace::dw_partial, static_cast<std::size_t>(batch) * per_sample);
    T* const bpart = db ? part + static_cast<std::size_t>(batch) * OI : nullptr;  // (batch, O)
    const ExactTarget wt = dW.exact_target();
    const ExactTarget bt = db ? db->exact_target() : ExactTarget{};
    for (int s0 = 0; s0 < S; s0 += batch) {
      const int nb = std::min(batch, S - s0);
      const std::ptrdiff_t row0 = static_cast<std::ptrdiff_t>(s0) * Tr;
      gemm_det_batched<T>(ws, nb, O, I, Tr, transposed(dy.data() + row0 * ldy, ldy), Tr * ldy,
                          row_major(x.data() + row0 * ldx, ldx), Tr * ldx, part, static_cast<std::ptrdiff_t>(OI), I,
                          GemmOut::overwrite, bpart, O);
      if (OI > 0) DwAddExact<T>::run(wt, part, OI, nb);
      if (db) DwAddExact<T>::run(bt, bpart, static_cast<std::size_t>(O), nb);
    }
    return;
  }
  if (db) {
    const ExactTarget bt = db->exact_target();
    const T* dys = dy.data();
    Kokkos::parallel_for(
        "Linear::db_add_exact", Kokkos::RangePolicy<ExecSpace>(0, nob), KOKKOS_LAMBDA(const int blk) {
          const int o0 = blk * kBiasLanes;
          const int no = O - o0 < kBiasLanes ? O - o0 : kBiasLanes;
          bias_samples_exact<kBiasLanes>(dys, ldy, S, Tr, o0, no, &bt);
        });
  }
}

template <class T>
void Linear<T>::flush_weight(GradAccum<T>& dW, KernelWorkspace& ws) {
  if (dW.pending.count == 0) return;
  ProfileRegion region("Linear::flush_weight");
  // The GEMM of the samples still held (add_held counts its work under this label).
  counters::WorkScope work(
      counters::counting() ? weight_label("Linear::flush_weight", dW.pending.out, dW.pending.in).c_str() : "", 0.0,
      0.0);
  add_held(dW, ws);
}

template struct Linear<float>;
template struct Linear<double>;

}  // namespace minipipe
