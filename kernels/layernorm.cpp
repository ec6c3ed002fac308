// LayerNorm kernels: deterministic mode reduces each row in rowred's canonical order (host loop or
// device team kernel, same bits), fast mode with team reductions on the device path. On the host
// fast mode runs the deterministic row loop too: a Serial team of one thread per row was ~5x slower
// (minipipe_bench_kernels layernorm_f32), and fast mode's tolerance contract allows the exact bits.
#include "layernorm.hpp"

#include "kernel_path.hpp"
#include "row_reduce.hpp"

#include <stdexcept>
#include <string>

namespace minipipe {

namespace {
using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;
using Member = TeamPolicy::member_type;
template <class T>
using RowScratch = Kokkos::View<T*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

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
    const std::size_t bytes = RowScratch<T>::shmem_size(rowred::kLanes);
    Kokkos::parallel_for(
        "LayerNorm::forward_device", rowred::row_team_policy<TeamPolicy>(N).set_scratch_size(0, Kokkos::PerTeam(bytes)),
        KOKKOS_LAMBDA(const Member& team) {  // row n of (N,C)
          const int n = team.league_rank();
          T* red = RowScratch<T>(team.team_scratch(0), rowred::kLanes).data();
          const T s = rowred::team_reduce<rowred::Sum, T>(team, red, C, [&](int c, T a) { return a + x(n, c); });
          const T m = s / Cf;
          const T v = rowred::team_reduce<rowred::Sum, T>(team, red, C, [&](int c, T a) {
            const T d = x(n, c) - m;
            return fma_exact(d, d, a);
          });
          const T r = T(1) / sqrt_exact(v / Cf + eps);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C),
                               [&](const int c) { out(n, c) = ((x(n, c) - m) * r) * w(c) + b(c); });
          Kokkos::single(Kokkos::PerTeam(team), [&]() {
            mean(n) = m;
            rstd(n) = r;
          });
        });
    return;
  }
  if (!use_device_path()) {  // host, both modes: see the file header
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
  Kokkos::parallel_for(
      "LayerNorm::forward", TeamPolicy(N, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& team) {  // row n of (N,C)
        const int n = team.league_rank();
        T s = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, C), [&](const int c, T& acc) { acc += x(n, c); }, s);
        const T m = s / Cf;
        T v = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, C),
            [&](const int c, T& acc) {
              const T d = x(n, c) - m;
              acc += d * d;
            },
            v);
        const T r = T(1) / sqrt_exact(v / Cf + eps);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C),
                             [&](const int c) { out(n, c) = ((x(n, c) - m) * r) * w(c) + b(c); });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          mean(n) = m;
          rstd(n) = r;
        });
      });
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
    const std::size_t bytes = RowScratch<T>::shmem_size(rowred::kLanes);
    Kokkos::parallel_for(
        "LayerNorm::backward_input_device",
        rowred::row_team_policy<TeamPolicy>(N).set_scratch_size(0, Kokkos::PerTeam(bytes)),
        KOKKOS_LAMBDA(const Member& team) {  // row n of (N,C)
          const int n = team.league_rank();
          T* red = RowScratch<T>(team.team_scratch(0), rowred::kLanes).data();
          const T m = mean(n);
          const T r = rstd(n);
          const T sg =
              rowred::team_reduce<rowred::Sum, T>(team, red, C, [&](int c, T a) { return a + dout(n, c) * w(c); });
          const T sgx = rowred::team_reduce<rowred::Sum, T>(
              team, red, C, [&](int c, T a) { return fma_exact(dout(n, c) * w(c), (x(n, c) - m) * r, a); });
          const T mg = sg / Cf;
          const T mgx = sgx / Cf;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](const int c) {
            const T xhat = (x(n, c) - m) * r;
            dx(n, c) = r * ((dout(n, c) * w(c) - mg) - xhat * mgx);
          });
        });
    return;
  }
  if (!use_device_path()) {  // host, both modes
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
  Kokkos::parallel_for(
      "LayerNorm::backward_input", TeamPolicy(N, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& team) {
        const int n = team.league_rank();
        const T m = mean(n);
        const T r = rstd(n);
        T sg = 0, sgx = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, C), [&](const int c, T& acc) { acc += dout(n, c) * w(c); }, sg);
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, C),
            [&](const int c, T& acc) { acc += dout(n, c) * w(c) * ((x(n, c) - m) * r); }, sgx);
        const T mg = sg / Cf;
        const T mgx = sgx / Cf;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](const int c) {
          const T xhat = (x(n, c) - m) * r;
          dx(n, c) = r * ((dout(n, c) * w(c) - mg) - xhat * mgx);
        });
      });
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
  if (!use_device_path()) {
    // Host: a thread per block of kBlock channels walks the rows in order with the block's channels
    // side by side (contiguous loads, SIMD across channels), where a thread per channel strides
    // down a column. Each channel's chain is the device loop's below, so the bits are the same.
    constexpr int kBlock = 64;
    const bool det = mode == Mode::deterministic;
    Kokkos::parallel_for(
        "LayerNorm::backward_weight", Kokkos::RangePolicy<ExecSpace>(0, (C + kBlock - 1) / kBlock),
        KOKKOS_LAMBDA(const int blk) {
          const int c0 = blk * kBlock;
          const int w = C - c0 < kBlock ? C - c0 : kBlock;
          T pw[kBlock], pb[kBlock];
          const int groups = det ? S : 1;  // deterministic: one exact add per sample
          const int rows = det ? R : N;
          for (int s = 0; s < groups; ++s) {
            for (int j = 0; j < kBlock; ++j) pw[j] = pb[j] = 0;
            for (int n = s * rows; n < (s + 1) * rows; ++n) {
              const T m = mean(n), r = rstd(n);
              const T* xn = &x(n, c0);
              const T* gn = &dout(n, c0);
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
            for (int j = 0; j < w; ++j) {
              if (det) {
                gw.add(c0 + j, static_cast<double>(pw[j]));
                gb.add(c0 + j, static_cast<double>(pb[j]));
              } else {
                sw(c0 + j) += pw[j];
                sb(c0 + j) += pb[j];
              }
            }
          }
        });
    return;
  }
  if (mode == Mode::deterministic) {
    // One thread per channel c owns dw(c) and db(c): no two threads add to the same element.
    Kokkos::parallel_for(
        "LayerNorm::backward_weight", Kokkos::RangePolicy<ExecSpace>(0, C), KOKKOS_LAMBDA(const int c) {
          for (int s = 0; s < S; ++s) {
            T pw = 0, pb = 0;
            for (int n = s * R; n < (s + 1) * R; ++n) {
              const T g = dout(n, c);
              pw = fma_exact(g, (x(n, c) - mean(n)) * rstd(n), pw);
              pb += g;
            }
            gw.add(c, static_cast<double>(pw));
            gb.add(c, static_cast<double>(pb));
          }
        });
    return;
  }
  Kokkos::parallel_for(
      "LayerNorm::backward_weight", Kokkos::RangePolicy<ExecSpace>(0, C), KOKKOS_LAMBDA(const int c) {
        T pw = 0, pb = 0;
        for (int n = 0; n < N; ++n) {
          const T g = dout(n, c);
          pw += g * ((x(n, c) - mean(n)) * rstd(n));
          pb += g;
        }
        sw(c) += pw;
        sb(c) += pb;
      });
}

template struct LayerNorm<float>;
template struct LayerNorm<double>;

}  // namespace minipipe
