// LayerNorm kernels: deterministic mode reduces each row in rowred's canonical order (host loop or
// device team kernel, same bits), fast mode with team reductions on the device path. On the host
// fast mode runs the deterministic row loop too: a Serial team of one thread per row was ~5x slower
// (minipipe_bench_kernels layernorm_f32), and fast mode's tolerance contract allows the exact bits.
#include "layernorm.hpp"

#include "exact_row.hpp"
#include "kernel_path.hpp"
#include "row_reduce.hpp"
#include "team.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

namespace minipipe {

namespace {
// Where MemSpace is not host-accessible (a GPU) use_device_path() is always true (kernel_path.cpp).
constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

// Deterministic forward, a team per row n of (N,C): mean and variance in rowred's canonical lanes.
template <class T>
struct ForwardDet {
  CMat<T> x;
  CVec<T> w, b;
  Mat<T> out;
  Vec<T> mean, rstd;
  int C;
  T Cf, eps;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    const int n = team::league(tm);
    const auto red = team::scratch<T>(tm, 0, rowred::kLanes);
    const T s = rowred::team_reduce<rowred::Sum, T>(tm, red, C, [&](int c, T a) { return a + x(n, c); });
    const T m = s / Cf;
    const T v = rowred::team_reduce<rowred::Sum, T>(tm, red, C, [&](int c, T a) {
      const T d = x(n, c) - m;
      return fma_exact(d, d, a);
    });
    const T r = T(1) / sqrt_exact(v / Cf + eps);
    team::threads(tm, C, [&](const int c) { out(n, c) = ((x(n, c) - m) * r) * w(c) + b(c); });
    team::single(tm, [&]() {
      mean(n) = m;
      rstd(n) = r;
    });
  }
};

// Fast forward on the device path: team reductions in whatever order the backend takes.
template <class T>
struct ForwardFast {
  CMat<T> x;
  CVec<T> w, b;
  Mat<T> out;
  Vec<T> mean, rstd;
  int C;
  T Cf, eps;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    const int n = team::league(tm);
    const T s = team::sum<T>(tm, C, [&](const int c, T& acc) { acc += x(n, c); });
    const T m = s / Cf;
    const T v = team::sum<T>(tm, C, [&](const int c, T& acc) {
      const T d = x(n, c) - m;
      acc += d * d;
    });
    const T r = T(1) / sqrt_exact(v / Cf + eps);
    team::threads(tm, C, [&](const int c) { out(n, c) = ((x(n, c) - m) * r) * w(c) + b(c); });
    team::single(tm, [&]() {
      mean(n) = m;
      rstd(n) = r;
    });
  }
};

// Backward-input, a team per row: sg = sum of g = dout * w, sgx = sum of g * xhat (deterministic:
// rowred's order; fast: team reductions).
template <class T, bool kDet>
struct BackwardInput {
  CMat<T> x, dout;
  CVec<T> w, mean, rstd;
  Mat<T> dx;
  int C;
  T Cf;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    const int n = team::league(tm);
    const T m = mean(n);
    const T r = rstd(n);
    T sg, sgx;
    if constexpr (kDet) {
      const auto red = team::scratch<T>(tm, 0, rowred::kLanes);
      sg = rowred::team_reduce<rowred::Sum, T>(tm, red, C, [&](int c, T a) { return a + dout(n, c) * w(c); });
      sgx = rowred::team_reduce<rowred::Sum, T>(
          tm, red, C, [&](int c, T a) { return fma_exact(dout(n, c) * w(c), (x(n, c) - m) * r, a); });
    } else {
      sg = team::sum<T>(tm, C, [&](const int c, T& acc) { acc += dout(n, c) * w(c); });
      sgx = team::sum<T>(tm, C, [&](const int c, T& acc) { acc += dout(n, c) * w(c) * ((x(n, c) - m) * r); });
    }
    const T mg = sg / Cf;
    const T mgx = sgx / Cf;
    team::threads(tm, C, [&](const int c) {
      const T xhat = (x(n, c) - m) * r;
      dx(n, c) = r * ((dout(n, c) * w(c) - mg) - xhat * mgx);
    });
  }
};

// Weight gradient on the device path (see backward_weight): a team per block of kCols channels.
constexpr int kWCols = rowred::kLanes, kWChunks = 8;

template <class T>
struct BackwardWeight {
  CMat<T> x, dout;
  CVec<T> mean, rstd;
  ExactTarget gw, gb;
  View1<T> sw, sb;
  int N, C, R, chunks;
  bool det;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    constexpr int kCols = kWCols, kChunks = kWChunks;
    const int c0 = team::league(tm) * kCols;
    const int nc = C - c0 < kCols ? C - c0 : kCols;
    const auto pw = team::scratch<T>(tm, 0, 2 * kChunks * kCols);  // (kChunks, kCols)
    const auto pb = pw + kChunks * kCols;                          // (kChunks, kCols)
    for (int k0 = 0; k0 < chunks; k0 += kChunks) {
      const int nk = chunks - k0 < kChunks ? chunks - k0 : kChunks;
      team::threads(tm, nk * kCols, [&](const int e) {
        const int k = k0 + e / kCols, c = c0 + e % kCols;
        if (c - c0 >= nc) return;
        const int n0 = det ? k * R : static_cast<int>(static_cast<long long>(N) * k / chunks);
        const int n1 = det ? n0 + R : static_cast<int>(static_cast<long long>(N) * (k + 1) / chunks);
        T w_ = 0, b_ = 0;
        for (int n = n0; n < n1; ++n) {
          const T g = dout(n, c);
          if (det)
            w_ = fma_exact(g, (x(n, c) - mean(n)) * rstd(n), w_);
          else
            w_ += g * ((x(n, c) - mean(n)) * rstd(n));
          b_ += g;
        }
        pw[e] = w_;
        pb[e] = b_;
      });
      team::barrier(tm);
      team::threads(tm, nc, [&](const int j) {
        if (det) {
          for (int k = 0; k < nk; ++k) {
            gw.add(c0 + j, static_cast<double>(pw[k * kCols + j]));
            gb.add(c0 + j, static_cast<double>(pb[k * kCols + j]));
          }
          return;
        }
        T fw = 0, fb = 0;  // fast mode: chunks <= kChunks, so this is the one pass
        for (int k = 0; k < nk; ++k) {
          fw += pw[k * kCols + j];
          fb += pb[k * kCols + j];
        }
        sw(c0 + j) += fw;
        sb(c0 + j) += fb;
      });
      team::barrier(tm);
    }
  }
};

// The weight gradient's launch shape: a team per kWCols channels; on a GPU a thread per (chunk,
// channel) of a pass, on a host backend Kokkos::AUTO.
template <class T>
team::Shape backward_weight_shape(team::Target target, int C) {
  team::Shape s;
  s.league = (C + kWCols - 1) / kWCols;
  s.team = target == team::Target::host ? team::kAuto : kWChunks * kWCols;
  s.scratch = team::scratch_bytes<T>(2 * kWChunks * kWCols);
  return s;
}

// The host path's weight-gradient chains of one block of w <= kHostBlock channels over `rows` rows
// (x and dout from the block's first element, rows ld apart; mean and rstd from the first row):
// pw[j] and pb[j] start at zero and take the rows in order with the device loop's operations
// (BackwardWeight), written once each at the end.
constexpr int kHostBlock = 128;
template <class T>
inline void weight_chains(const T* x, const T* dout, std::size_t ld, const T* mean, const T* rstd, int rows, int w,
                          bool det, T* pw, T* pb) {
  for (int j = 0; j < w; ++j) pw[j] = pb[j] = 0;
  for (int n = 0; n < rows; ++n) {
    const T m = mean[n], r = rstd[n];
    const T* xn = x + n * ld;
    const T* gn = dout + n * ld;
    if (det)
      for (int j = 0; j < w; ++j) {
        pw[j] = fma_exact(gn[j], (xn[j] - m) * r, pw[j]);
        pb[j] += gn[j];
      }
    else
      for (int j = 0; j < w; ++j) {
        pw[j] += gn[j] * ((xn[j] - m) * r);
        pb[j] += gn[j];
      }
  }
}
#ifdef MINIPIPE_HOST_AVX512
// float: the same operations per lane, the 2 x 128 partials held in 16 registers across the rows
// (the loops above store and reload them every row) and the rows ahead prefetched. A GPU build
// compiles no host path, so nothing calls it there (maybe_unused).
template <>
[[maybe_unused]] inline void weight_chains<float>(const float* x, const float* dout, std::size_t ld, const float* mean,
                                                  const float* rstd, int rows, int w, bool det, float* pw, float* pb) {
  constexpr int K = kHostBlock / 16;
  __mmask16 lanes[K];
  for (int k = 0; k < K; ++k) {
    const int left = w - 16 * k;
    lanes[k] = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : left <= 0 ? 0u : (1u << left) - 1u);
  }
  __m512 aw[K], ab[K];
  for (int k = 0; k < K; ++k) aw[k] = ab[k] = _mm512_setzero_ps();
  for (int n = 0; n < rows; ++n) {
    const __m512 m = _mm512_set1_ps(mean[n]), r = _mm512_set1_ps(rstd[n]);
    const float* xn = x + n * ld;
    const float* gn = dout + n * ld;
    // The rows are C apart and a block reads a slice of each: the hardware prefetchers left this
    // loop waiting on memory at under half the triad's rate; 8 rows ahead hides it.
    if (n + 8 < rows)
      for (int k = 0; k < K; ++k) {
        _mm_prefetch(reinterpret_cast<const char*>(xn + 8 * ld + 16 * k), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(gn + 8 * ld + 16 * k), _MM_HINT_T0);
      }
    MINIPIPE_HOST_UNROLL(8)
    for (int k = 0; k < K; ++k) {
      const __m512 g = _mm512_maskz_loadu_ps(lanes[k], gn + 16 * k);
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes[k], xn + 16 * k), m), r);
      aw[k] = det ? _mm512_fmadd_ps(g, xh, aw[k]) : _mm512_add_ps(aw[k], _mm512_mul_ps(g, xh));
      ab[k] = _mm512_add_ps(ab[k], g);
    }
  }
  for (int k = 0; k < K; ++k) {
    _mm512_mask_storeu_ps(pw + 16 * k, lanes[k], aw[k]);
    _mm512_mask_storeu_ps(pb + 16 * k, lanes[k], ab[k]);
  }
}
#endif

}  // namespace

template <class T>
void LayerNorm<T>::forward(Mode mode, CMat<T> x, CVec<T> w, CVec<T> b, Mat<T> out, Vec<T> mean, Vec<T> rstd) {
  const int N = static_cast<int>(x.extent(0));
  const int C = static_cast<int>(x.extent(1));
  require(w.extent(0) == std::size_t(C) && b.extent(0) == std::size_t(C), "LayerNorm::forward",
          "w and b must have C = " + std::to_string(C) + " entries");
  require(out.extent(0) == x.extent(0) && out.extent(1) == x.extent(1), "LayerNorm::forward", "out shape != x shape");

  // Per element: mean 1, variance 3, normalize and affine 4 FLOPs; x read, out written.
  const double nc = double(N) * C, sz = sizeof(T);
  counters::WorkScope work("LayerNorm::forward", 8 * nc, sz * (2 * nc + 2.0 * C + 2.0 * N));
  require(mean.extent(0) == x.extent(0) && rstd.extent(0) == x.extent(0), "LayerNorm::forward",
          "mean and rstd must have N entries");
  const T Cf = static_cast<T>(C);
  const T eps = static_cast<T>(kEps);
  if (mode == Mode::deterministic && use_device_path()) {
    team::launch<rowred::kLanes, rowred::kRowMinTeams>(
        "LayerNorm::forward_device",
        rowred::row_shape(team::launch_target(), N, team::scratch_bytes<T>(rowred::kLanes)),
        ForwardDet<T>{x, w, b, out, mean, rstd, C, Cf, eps});
    return;
  }
  if constexpr (kHostAccessible) {  // a GPU never takes the host path: not compiled for it
    if (!use_device_path()) {       // host, both modes: see the file header
      Kokkos::parallel_for(
          "LayerNorm::forward", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const int n) {  // row n of (N,C)
            const T s = rowred::reduce<rowred::Sum, T>(C, [&](int c, T a) { return a + x(n, c); });
            const T m = s / Cf;
            const T v = rowred::reduce<rowred::Sum, T>(C, [&](int c, T a) {
              const T d = x(n, c) - m;
              return fma_exact(d, d, a);
            });
            const T r = T(1) / sqrt_exact(v / Cf + eps);
            for (int c = 0; c < C; ++c) out(n, c) = ((x(n, c) - m) * r) * w(c) + b(c);
            mean(n) = m;
            rstd(n) = r;
          });
      return;
    }
  }
  team::launch<rowred::kLanes, rowred::kRowMinTeams>("LayerNorm::forward",
                                                     rowred::row_shape(team::launch_target(), N, 0),
                                                     ForwardFast<T>{x, w, b, out, mean, rstd, C, Cf, eps});
}

template <class T>
void LayerNorm<T>::backward_input(Mode mode, CMat<T> x, CVec<T> w, CVec<T> mean, CVec<T> rstd, CMat<T> dout,
                                  Mat<T> dx) {
  const int N = static_cast<int>(x.extent(0));
  const int C = static_cast<int>(x.extent(1));
  // Per element: x-hat 2, dout*w 1, two row sums 3, dx 4 FLOPs; x and dout read, dx written.
  const double nc = double(N) * C, sz = sizeof(T);
  counters::WorkScope work("LayerNorm::backward_input", 10 * nc, sz * (3 * nc + C + 2.0 * N));
  require(w.extent(0) == std::size_t(C), "LayerNorm::backward_input", "w must have C entries");
  require(dout.extent(0) == x.extent(0) && dout.extent(1) == x.extent(1) && dx.extent(0) == x.extent(0) &&
              dx.extent(1) == x.extent(1),
          "LayerNorm::backward_input", "dout and dx must have the shape of x");
  require(mean.extent(0) == x.extent(0) && rstd.extent(0) == x.extent(0), "LayerNorm::backward_input",
          "mean and rstd must have N entries");
  const T Cf = static_cast<T>(C);
  // sg = sum of g = dout * w, sgx = sum of g * xhat, both in rowred's order.
  if (mode == Mode::deterministic && use_device_path()) {
    team::launch<rowred::kLanes, rowred::kRowMinTeams>(
        "LayerNorm::backward_input_device",
        rowred::row_shape(team::launch_target(), N, team::scratch_bytes<T>(rowred::kLanes)),
        BackwardInput<T, true>{x, dout, w, mean, rstd, dx, C, Cf});
    return;
  }
  if constexpr (kHostAccessible) {  // a GPU never takes the host path: not compiled for it
    if (!use_device_path()) {       // host, both modes
      Kokkos::parallel_for(
          "LayerNorm::backward_input", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const int n) {
            const T m = mean(n);
            const T r = rstd(n);
            const T sg = rowred::reduce<rowred::Sum, T>(C, [&](int c, T a) { return a + dout(n, c) * w(c); });
            const T sgx = rowred::reduce<rowred::Sum, T>(
                C, [&](int c, T a) { return fma_exact(dout(n, c) * w(c), (x(n, c) - m) * r, a); });
            const T mg = sg / Cf;
            const T mgx = sgx / Cf;
            for (int c = 0; c < C; ++c) {
              const T xhat = (x(n, c) - m) * r;
              dx(n, c) = r * ((dout(n, c) * w(c) - mg) - xhat * mgx);
            }
          });
      return;
    }
  }
  team::launch<rowred::kLanes, rowred::kRowMinTeams>("LayerNorm::backward_input",
                                                     rowred::row_shape(team::launch_target(), N, 0),
                                                     BackwardInput<T, false>{x, dout, w, mean, rstd, dx, C, Cf});
}

template <class T>
void LayerNorm<T>::backward_weight(Mode mode, CMat<T> x, CVec<T> mean, CVec<T> rstd, CMat<T> dout, int rows_per_sample,
                                   GradAccum<T>& dw, GradAccum<T>& db) {
  const int N = static_cast<int>(x.extent(0));
  const int C = static_cast<int>(x.extent(1));
  // Per element: x-hat 2, dw and db 3 FLOPs; x and dout read, the 2C sums read and written.
  const double nc = double(N) * C, sz = sizeof(T);
  counters::WorkScope work("LayerNorm::backward_weight", 5 * nc, sz * (2 * nc + 2.0 * N + 4.0 * C));
  require(rows_per_sample > 0 && N % rows_per_sample == 0, "LayerNorm::backward_weight",
          "rows_per_sample = " + std::to_string(rows_per_sample) + " must divide N = " + std::to_string(N));
  require(dw.size() == std::size_t(C) && db.size() == std::size_t(C), "LayerNorm::backward_weight",
          "dw and db must have C entries");
  require(dw.mode == mode && db.mode == mode, "LayerNorm::backward_weight", "accumulator mode != kernel mode");
  require(dout.extent(0) == x.extent(0) && dout.extent(1) == x.extent(1), "LayerNorm::backward_weight",
          "dout must have the shape of x");
  const int R = rows_per_sample;
  const int S = N / R;
  const ExactTarget gw = dw.exact_target();
  const ExactTarget gb = db.exact_target();
  const View1<T> sw = dw.sum, sb = db.sum;  // fast mode
  if constexpr (!kHostAccessible) {
    // A GPU never takes the host path: not compiled for it (its 2 x 64 partials a thread took 167
    // (float) and 255 registers plus 328 B of spills (double) in device code; scripts/device_budgets.sh).
  } else if (!use_device_path()) {
    // Host: a thread per block of kHostBlock channels walks the rows in order with the block's channels
    // side by side (contiguous loads, SIMD across channels), where a thread per channel strides
    // down a column. Each channel's chain is the device loop's below, so the bits are the same.
    if (N == 0) return;
    const bool det = mode == Mode::deterministic;
    Kokkos::parallel_for(
        "LayerNorm::backward_weight", Kokkos::RangePolicy<ExecSpace>(0, (C + kHostBlock - 1) / kHostBlock),
        KOKKOS_LAMBDA(const int blk) {
          const int c0 = blk * kHostBlock;
          const int w = C - c0 < kHostBlock ? C - c0 : kHostBlock;
          T pw[kHostBlock], pb[kHostBlock];
          const int groups = det ? S : 1;  // deterministic: one exact add per sample
          const int rows = det ? R : N;
          int ov_w = 0, ov_b = 0;
          for (int s = 0; s < groups; ++s) {
            weight_chains<T>(&x(s * rows, c0), &dout(s * rows, c0), std::size_t(C), &mean(s * rows), &rstd(s * rows),
                             rows, w, det, pw, pb);
            if (det) {
              exact_row::add(&gw.exact(c0), pw, w, ov_w);
              exact_row::add(&gb.exact(c0), pb, w, ov_b);
            } else {
              for (int j = 0; j < w; ++j) {
                sw(c0 + j) += pw[j];
                sb(c0 + j) += pb[j];
              }
            }
          }
          if (ov_w) gw.overflow() = 1;
          if (ov_b) gb.overflow() = 1;
        });
    return;
  }
  // Device: a team per block of kLanes channels (consecutive threads read consecutive channels of a
  // row) runs the chains of kChunks row ranges side by side, a thread per (range, channel), parks
  // them in scratch, and the thread of a channel then adds its ranges in order. Deterministic mode:
  // a range is one sample, its chain the host loop's above, added exactly (any order gives the
  // same bits). Fast mode: kChunks equal row ranges, their partials summed in range order.
  const bool det = mode == Mode::deterministic;
  const int chunks = det ? S : (N < kWChunks ? N : kWChunks);
  team::launch("LayerNorm::backward_weight_device", backward_weight_shape<T>(team::launch_target(), C),
               BackwardWeight<T>{x, dout, mean, rstd, gw, gb, sw, sb, N, C, R, chunks, det});
}

template struct LayerNorm<float>;
template struct LayerNorm<double>;

}  // namespace minipipe
