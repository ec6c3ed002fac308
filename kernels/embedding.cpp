// Embedding kernels (token + position lookup and their weight gradients), explicitly
// instantiated for float and double.
#include "embedding.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "exact_row.hpp"
#include "kernel_path.hpp"
#include "team.hpp"

namespace minipipe {

namespace {
// Where MemSpace is not host-accessible (a GPU) use_device_path() is always true (kernel_path.cpp).
constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;
}  // namespace

template <class Real>
void Embedding<Real>::forward(int B, int T, CIdx tokens, CMat<Real> wte, CMat<Real> wpe, Mat<Real> out) {
  const int C = static_cast<int>(wte.extent(1));
  const std::size_t N = std::size_t(B) * std::size_t(T);
  require(tokens.extent(0) == N, "Embedding::forward", "tokens must have B*T = " + std::to_string(N) + " entries");
  require(wpe.extent(1) == std::size_t(C) && wpe.extent(0) >= std::size_t(T), "Embedding::forward",
          "wpe must be (Tmax >= T, C)");
  require(out.extent(0) == N && out.extent(1) == std::size_t(C), "Embedding::forward", "out must be (B*T, C)");
  // out = wte[token] + wpe[t]: one add an element; two rows gathered, one written.
  counters::WorkScope work("Embedding::forward", double(N) * C, sizeof(Real) * 3.0 * N * C + 4.0 * N);
  if constexpr (kHostAccessible) {  // a GPU never takes the host path: not compiled for it
    if (!use_device_path()) {
      // Host: a row an iteration, its channel loop over three contiguous rows vectorizes. An element
      // an iteration took a 64-bit division by C per element: 3 GB/s at C = 256.
      Kokkos::parallel_for(
          "Embedding::forward", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const std::size_t n) {
            const Real* e = &wte(tokens(n), 0);
            const Real* p = &wpe(n % std::size_t(T), 0);
            Real* o = &out(n, 0);
            for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
          });
      return;
    }
  }
  // Device path: an element a thread (consecutive threads on consecutive channels of a row), its
  // (n, c) from 32-bit index math where the output fits.
  const std::size_t NC = N * std::size_t(C);
  if (NC <= std::size_t(2147483647)) {
    Kokkos::parallel_for(
        "Embedding::forward", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int>>(0, static_cast<int>(NC)),
        KOKKOS_LAMBDA(const int i) {  // element (n, c) of out (B*T, C)
          const int n = i / C;
          const int c = i - n * C;
          out(n, c) = wte(tokens(n), c) + wpe(n % T, c);
        });
    return;
  }
  Kokkos::parallel_for(
      "Embedding::forward", Kokkos::RangePolicy<ExecSpace>(0, NC),
      KOKKOS_LAMBDA(const std::size_t i) {  // element (n, c) of out (B*T, C)
        const std::size_t n = i / std::size_t(C);
        const int c = static_cast<int>(i - n * std::size_t(C));
        out(n, c) = wte(tokens(n), c) + wpe(n % std::size_t(T), c);
      });
}

namespace {
// dwte on the device path: a team per (token range, block of kCols channels); the thread of channel c
// adds, in row order, every row whose token falls in the team's range.
template <class Real>
struct WteBody {
  CIdx tokens;
  CMat<Real> dout;
  ExactTarget gte;
  View1<Real> ste;
  int N, C, V, ncb, per_range;
  bool det;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    constexpr int kCols = 32;
    const int v0 = team::league(tm) / ncb * per_range;
    const int v1 = v0 + per_range < V ? v0 + per_range : V;
    const int c0 = team::league(tm) % ncb * kCols;
    const int nc = C - c0 < kCols ? C - c0 : kCols;
    team::threads(tm, nc, [&](const int j) {
      const int c = c0 + j;
      for (int n = 0; n < N; ++n) {
        const int v = tokens(n);
        if (v < v0 || v >= v1) continue;
        const std::size_t e = std::size_t(v) * std::size_t(C) + std::size_t(c);
        if (det)
          gte.add(e, static_cast<double>(dout(n, c)));
        else
          ste(e) += dout(n, c);
      }
    });
  }
};

}  // namespace

template <class Real>
void Embedding<Real>::backward_weight(Mode mode, int B, int T, CIdx tokens, CMat<Real> dout, GradAccum<Real>& dwte,
                                      GradAccum<Real>& dwpe) {
  const int C = static_cast<int>(dout.extent(1));
  const int N = B * T;
  require(tokens.extent(0) == std::size_t(N) && dout.extent(0) == std::size_t(N), "Embedding::backward_weight",
          "tokens and dout must have B*T rows");
  // dwte[token] += dout and dwpe[t] += dout: two adds an element.
  counters::WorkScope work("Embedding::backward_weight", 2.0 * N * C, sizeof(Real) * 5.0 * N * C + 4.0 * N);
  require(C > 0 && dwte.size() % std::size_t(C) == 0, "Embedding::backward_weight", "dwte must be V*C");
  require(dwpe.size() >= std::size_t(T) * std::size_t(C), "Embedding::backward_weight",
          "dwpe must be Tmax*C, Tmax >= T");
  require(dwte.mode == mode && dwpe.mode == mode, "Embedding::backward_weight", "accumulator mode != kernel mode");
  const ExactTarget gte = dwte.exact_target();
  const ExactTarget gpe = dwpe.exact_target();
  const View1<Real> ste = dwte.sum, spe = dwpe.sum;  // fast mode
  const bool det = mode == Mode::deterministic;

  // dwte: the thread that owns element (v, c) adds every row n with tokens(n) = v in order
  // n = 0..N-1, so repeated tokens need no atomics and the bits (fast mode's sums included) do not
  // depend on which thread owns which elements. dwpe: element (t, c) receives exactly one row per
  // sample, b = 0..B-1 in order.
  if constexpr (kHostAccessible) {  // a GPU never takes the host path: not compiled for it
    if (!use_device_path()) {
      // Host: a thread per block of kHostCols channels walks the rows in the orders above with the
      // block's channels side by side (the bits of both modes are the device path's), so loads and
      // accumulators are contiguous and the adds vectorize across channels. A thread per channel
      // strided down dout's column and the accumulators' (4 KiB apart at C = 256, so every access
      // of a column fell in one L1 set): 1.4 GB/s, and deterministic mode 2.4x fast mode's time.
      constexpr int kHostCols = 64;
      const int nblk = (C + kHostCols - 1) / kHostCols;
      Kokkos::parallel_for(
          "Embedding::backward_weight_wte", Kokkos::RangePolicy<ExecSpace>(0, nblk), KOKKOS_LAMBDA(const int blk) {
            const int c0 = blk * kHostCols;
            const int w = C - c0 < kHostCols ? C - c0 : kHostCols;
            int ov = 0;
            for (int n = 0; n < N; ++n) {
              const std::size_t e0 = std::size_t(tokens(n)) * std::size_t(C) + std::size_t(c0);
              const Real* g = &dout(n, c0);
              if (det) {
                exact_row::add(&gte.exact(e0), g, w, ov);
              } else {
                Real* d = &ste(e0);
                for (int j = 0; j < w; ++j) d[j] += g[j];
              }
            }
            if (ov) gte.overflow() = 1;
          });
      Kokkos::parallel_for(
          "Embedding::backward_weight_wpe", Kokkos::RangePolicy<ExecSpace>(0, std::size_t(T) * std::size_t(nblk)),
          KOKKOS_LAMBDA(const std::size_t i) {  // position t, channels c0 .. c0 + w - 1
            const int t = static_cast<int>(i / std::size_t(nblk));
            const int c0 = static_cast<int>(i % std::size_t(nblk)) * kHostCols;
            const int w = C - c0 < kHostCols ? C - c0 : kHostCols;
            const std::size_t e0 = std::size_t(t) * std::size_t(C) + std::size_t(c0);
            if (det) {
              int ov = 0;
              for (int b = 0; b < B; ++b) exact_row::add(&gpe.exact(e0), &dout(b * T + t, c0), w, ov);
              if (ov) gpe.overflow() = 1;
            } else {
              Real s[kHostCols];
              for (int j = 0; j < w; ++j) s[j] = 0;
              for (int b = 0; b < B; ++b) {
                const Real* g = &dout(b * T + t, c0);
                for (int j = 0; j < w; ++j) s[j] += g[j];
              }
              Real* d = &spe(e0);
              for (int j = 0; j < w; ++j) d[j] += s[j];
            }
          });
      return;
    }
  }

  // Device path: a team per (one of kTokenBlocks token ranges, block of kCols channels) walks the
  // rows, each thread adding those whose token falls in its range: kTokenBlocks times the
  // parallelism of a thread per channel (C threads scanning all N rows), for a scan of the token
  // ids that every thread of a team shares.
  if (N > 0) {
    constexpr int kCols = 32, kTokenBlocks = 32;
    const int V = static_cast<int>(dwte.size() / std::size_t(C));
    const int ranges = V < kTokenBlocks ? V : kTokenBlocks;
    const int per_range = (V + ranges - 1) / ranges;
    const int ncb = (C + kCols - 1) / kCols;
    team::Shape shape;  // a GPU team: a thread per channel of the block; a host backend: AUTO
    shape.league = ranges * ncb;
    shape.team = team::launch_target() == team::Target::host ? team::kAuto : kCols;
    team::launch("Embedding::backward_weight_wte_device", shape,
                 WteBody<Real>{tokens, dout, gte, ste, N, C, V, ncb, per_range, det});
  }
  Kokkos::parallel_for(
      "Embedding::backward_weight_wpe", Kokkos::RangePolicy<ExecSpace>(0, std::size_t(T) * std::size_t(C)),
      KOKKOS_LAMBDA(const std::size_t e) {  // element (t, c) of dwpe (Tmax, C)
        const int t = static_cast<int>(e / std::size_t(C));
        const int c = static_cast<int>(e % std::size_t(C));
        if (det) {
          for (int b = 0; b < B; ++b) gpe.add(e, static_cast<double>(dout(b * T + t, c)));
        } else {
          Real s = 0;
          for (int b = 0; b < B; ++b) s += dout(b * T + t, c);
          spe(e) += s;
        }
      });
}

template struct Embedding<float>;
template struct Embedding<double>;

}  // namespace minipipe
