// GEMM benchmarks on the model's shapes: gemm_det vs KokkosBlas::gemm vs cblas directly (the
// last two must match if Kokkos Kernels really takes the BLAS TPL), Linear in both modes, and the
// exact backward-weight (gemm_det_exact) beside cblas on the same dW.
#include <KokkosBlas3_gemm.hpp>

#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kernels/gemm.hpp"
#include "kernels/linear.hpp"

#ifdef MINIPIPE_HAVE_CBLAS
#include <cblas.h>
#endif

namespace minipipe::bench {
namespace {

enum class Impl { det, kokkosblas, cblas };
enum class Phase { forward, backward_input, backward_weight };

const char* name(Impl i) {
  return i == Impl::det ? "det" : i == Impl::kokkosblas ? "kokkosblas" : "cblas";
}
const char* name(Phase p) {
  return p == Phase::forward ? "fwd" : p == Phase::backward_input ? "bwd_input" : "bwd_weight";
}

// One linear layer W (O, I) applied to `tokens` rows.
struct LayerShape {
  const char* layer;
  int O, I;
};

// GEMM extents of a phase: forward y = x W^T, backward-input dx = dy W, backward-weight
// dW = dy^T x (the whole token batch at once, K = tokens).
struct Extents {
  int M, N, K;
};
Extents extents(Phase p, const LayerShape& l, int tokens) {
  switch (p) {
    case Phase::forward:
      return {tokens, l.O, l.I};
    case Phase::backward_input:
      return {tokens, l.I, l.O};
    default:
      return {l.O, l.I, tokens};
  }
}

#ifdef MINIPIPE_HAVE_CBLAS
void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float* A, int lda, const float* B,
                int ldb, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}
void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const double* A, int lda, const double* B,
                int ldb, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, C, ldc);
}
#endif

template <class T>
void bench_gemm(benchmark::State& st, Impl impl, Phase phase, LayerShape l, int tokens) {
  const int O = l.O, I = l.I;
  const auto x = filled<T>(static_cast<std::size_t>(tokens) * I, 1);
  const auto W = filled<T>(static_cast<std::size_t>(O) * I, 2);
  const auto dy = filled<T>(static_cast<std::size_t>(tokens) * O, 3);
  View1<T> out("gemm_out", static_cast<std::size_t>(std::max(tokens, O)) * std::max(O, I));
  const CMat<T> xm(x.data(), tokens, I), Wm(W.data(), O, I), dym(dy.data(), tokens, O);
  const Extents e = extents(phase, l, tokens);
  const Mat<T> cm(out.data(), e.M, e.N);
  KernelWorkspace ws;

  auto run = [&] {
    switch (impl) {
      case Impl::det:
        if (phase == Phase::forward)
          gemm_det<T>(ws, e.M, e.N, e.K, row_major(x.data(), I), transposed(W.data(), I), out.data(), e.N);
        else if (phase == Phase::backward_input)
          gemm_det<T>(ws, e.M, e.N, e.K, row_major(dy.data(), O), row_major(W.data(), I), out.data(), e.N);
        else
          gemm_det<T>(ws, e.M, e.N, e.K, transposed(dy.data(), O), row_major(x.data(), I), out.data(), e.N);
        break;
      case Impl::kokkosblas:
        if (phase == Phase::forward)
          KokkosBlas::gemm("N", "T", T(1), xm, Wm, T(0), cm);
        else if (phase == Phase::backward_input)
          KokkosBlas::gemm("N", "N", T(1), dym, Wm, T(0), cm);
        else
          KokkosBlas::gemm("T", "N", T(1), dym, xm, T(0), cm);
        fence("bench::kokkosblas");
        break;
      case Impl::cblas:
#ifdef MINIPIPE_HAVE_CBLAS
        if (phase == Phase::forward)
          cblas_gemm(CblasNoTrans, CblasTrans, e.M, e.N, e.K, x.data(), I, W.data(), I, out.data(), e.N);
        else if (phase == Phase::backward_input)
          cblas_gemm(CblasNoTrans, CblasNoTrans, e.M, e.N, e.K, dy.data(), O, W.data(), I, out.data(), e.N);
        else
          cblas_gemm(CblasTrans, CblasNoTrans, e.M, e.N, e.K, dy.data(), O, x.data(), I, out.data(), e.N);
#endif
        break;
    }
  };
  if (impl == Impl::cblas) {
#ifndef MINIPIPE_HAVE_CBLAS
    st.SkipWithError("built without cblas");
    return;
#endif
    if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible) {
      st.SkipWithError("cblas needs host-accessible memory");
      return;
    }
  }
  run();  // warm-up: packing buffers, BLAS thread pool, page faults
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  set_rates(st, 2.0 * e.M * e.N * e.K, 0);
}

// Linear layer as the stage calls it. backward_weight accumulates into GradAccum with samples
// of seq_len rows: in deterministic mode each sample's partial (K = seq_len) is added exactly to
// the fixed-point accumulators as it leaves the GEMM microkernel, which is what the mode costs
// over fast.
template <class T>
void bench_linear(benchmark::State& st, Mode mode, Phase phase, LayerShape l, int tokens, int seq_len) {
  const int O = l.O, I = l.I;
  const auto x = filled<T>(static_cast<std::size_t>(tokens) * I, 1);
  const auto W = filled<T>(static_cast<std::size_t>(O) * I, 2);
  const auto b = filled<T>(static_cast<std::size_t>(O), 3);
  const auto dy = filled<T>(static_cast<std::size_t>(tokens) * O, 4);
  View2<T> y("y", tokens, O), dx("dx", tokens, I);
  const CMat<T> xm(x.data(), tokens, I), Wm(W.data(), O, I), dym(dy.data(), tokens, O);
  GradAccum<T> gW("bench_w", static_cast<std::size_t>(O) * I, mode), gb("bench_b", O, mode);
  KernelWorkspace ws;
  auto run = [&] {
    if (phase == Phase::forward)
      Linear<T>::forward(mode, xm, Wm, b, y, ws);
    else if (phase == Phase::backward_input)
      Linear<T>::backward_input(mode, dym, Wm, dx, ws);
    else
      Linear<T>::backward_weight(mode, xm, dym, seq_len, gW, &gb, ws);
    fence("bench::linear");
  };
  run();
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  set_rates(st, 2.0 * tokens * O * I, 0);
}

// The deterministic backward-weight as the stage runs it on the host, dW (O, I) += sum over S
// samples of dy_s^T x_s (K = seq_len rows each) added exactly (gemm_det_exact, with the fused bias
// row sums), beside cblas_sgemm of the same dW with all S K rows as one product (fast mode's GEMM):
// the ratio of the two rates in one process is what the exact path costs over the library.
//   exact_first: the accumulators are known to be zero (a step's first call, as at one micro-batch
//                a step), so the first fold stores the sums; exact_add: they are added to.
//   persample:   the same S short products (K = seq_len) by gemm_det into one float C, nothing
//                added exactly: the short-K GEMMs alone, without the limbs and folds.
enum class ExactVariant { first, add, persample, cblas };
const char* name(ExactVariant v) {
  return v == ExactVariant::first       ? "exact_first"
         : v == ExactVariant::add       ? "exact_add"
         : v == ExactVariant::persample ? "persample"
                                        : "cblas";
}
void bench_exact(benchmark::State& st, ExactVariant variant, LayerShape l, int samples, int seq_len) {
  const int O = l.O, I = l.I, rows = samples * seq_len;
  const auto x = filled<float>(static_cast<std::size_t>(rows) * I, 1);
  const auto dy = filled<float>(static_cast<std::size_t>(rows) * O, 4);
  const ExactTarget dw{ExactView("bench_exact_w", static_cast<std::size_t>(O) * I), FlagView("bench_exact_w_ov"),
                       variant == ExactVariant::first};
  const ExactTarget db{ExactView("bench_exact_b", static_cast<std::size_t>(O)), FlagView("bench_exact_b_ov"), false};
  View1<float> out("bench_exact_out", static_cast<std::size_t>(O) * I);
  KernelWorkspace ws;
  const std::ptrdiff_t a_step = static_cast<std::ptrdiff_t>(seq_len) * O,
                       b_step = static_cast<std::ptrdiff_t>(seq_len) * I;
  auto run = [&] {
    switch (variant) {
      case ExactVariant::first:
      case ExactVariant::add:
        gemm_det_exact(ws, GemmOptions{}, O, I, seq_len, samples, transposed(dy.data(), O), a_step,
                       row_major(x.data(), I), b_step, dw, &db);
        break;
      case ExactVariant::persample:
        for (int s = 0; s < samples; ++s)
          gemm_det<float>(ws, O, I, seq_len, transposed(dy.data() + s * a_step, O), row_major(x.data() + s * b_step, I),
                          out.data(), I);
        break;
      case ExactVariant::cblas:
#ifdef MINIPIPE_HAVE_CBLAS
        cblas_gemm(CblasTrans, CblasNoTrans, O, I, rows, dy.data(), O, x.data(), I, out.data(), I);
#endif
        break;
    }
  };
  if (variant == ExactVariant::cblas) {
#ifndef MINIPIPE_HAVE_CBLAS
    st.SkipWithError("built without cblas");
    return;
#endif
  }
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible) {
    st.SkipWithError("the exact path and cblas need host-accessible memory");
    return;
  }
  run();  // warm-up: packing buffers, BLAS thread pool, page faults
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  set_rates(st, 2.0 * rows * O * I, 0);
}

// The forward (or backward-input) GEMMs of `layers` blocks' four Linear layers in order, each
// weight kept packed (PackedB) as the stage keeps it, on `tokens` rows: a micro-batch's pass. When
// the weights exceed the last-level cache every pass streams them from memory once, so running
// this at tokens = B*T and at B*T/m shows what splitting the batch into m micro-batches costs
// the GEMMs (the kept panels read per flop grow m-fold).
template <class T>
void bench_kept_pass(benchmark::State& st, Phase phase, const ModelShape& s) {
  const int C = s.channels, N = s.tokens;
  const LayerShape shapes[] = {{"qkv", 3 * C, C}, {"attn_proj", C, C}, {"fc", 4 * C, C}, {"fc_proj", C, 4 * C}};
  struct Layer {
    LayerShape l;
    View1<T> W;
    PackedB<T> packed;
  };
  std::vector<Layer> layers;
  std::size_t weight_bytes = 0;
  double flops = 0;
  for (int b = 0; b < s.layers; ++b)
    for (const LayerShape& l : shapes) {
      layers.push_back({l, filled<T>(static_cast<std::size_t>(l.O) * l.I, 10 + layers.size()), {}});
      layers.back().packed.enable();
      weight_bytes += static_cast<std::size_t>(l.O) * l.I * sizeof(T);
      flops += 2.0 * N * l.O * l.I;
    }
  const auto in = filled<T>(static_cast<std::size_t>(N) * 4 * C, 1);
  View1<T> out("kept_pass_out", static_cast<std::size_t>(N) * 4 * C);
  KernelWorkspace ws;
  auto run = [&] {
    for (Layer& L : layers) {
      const int O = L.l.O, I = L.l.I;
      if (phase == Phase::forward)
        gemm_det<T>(ws, N, O, I, row_major(in.data(), I), transposed(L.W.data(), I), out.data(), O, nullptr,
                    GemmOut::overwrite, &L.packed);
      else
        gemm_det<T>(ws, N, I, O, row_major(in.data(), O), row_major(L.W.data(), I), out.data(), I, nullptr,
                    GemmOut::overwrite, &L.packed);
    }
  };
  run();  // packs every weight once
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  set_rates(st, flops, static_cast<double>(weight_bytes));
}

}  // namespace

void register_gemm_benchmarks(const ModelShape& s) {
  const int C = s.channels;
  const LayerShape layers[] = {{"qkv", 3 * C, C}, {"attn_proj", C, C}, {"fc", 4 * C, C}, {"fc_proj", C, 4 * C}};
  const Phase phases[] = {Phase::forward, Phase::backward_input, Phase::backward_weight};
  const Impl impls[] = {Impl::det, Impl::kokkosblas, Impl::cblas};
  for (const LayerShape& l : layers)
    for (Phase p : phases) {
      const Extents e = extents(p, l, s.tokens);
      const std::string shape = std::string(l.layer) + "_" + name(p) + "/" + std::to_string(e.M) + "x" +
                                std::to_string(e.N) + "x" + std::to_string(e.K);
      for (Impl i : impls)
        benchmark::RegisterBenchmark(("gemm_f32/" + shape + "/" + name(i)).c_str(),
                                     [=](benchmark::State& st) { bench_gemm<float>(st, i, p, l, s.tokens); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
  for (Phase p : {Phase::forward, Phase::backward_input})
    benchmark::RegisterBenchmark(("gemm_f32/kept_" + std::string(name(p)) + "/L" + std::to_string(s.layers) + "_N" +
                                  std::to_string(s.tokens) + "/det")
                                     .c_str(),
                                 [=](benchmark::State& st) { bench_kept_pass<float>(st, p, s); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  // The exact backward-weight beside cblas on the Linear shapes of a block and a head of 2C rows.
  const LayerShape exact_layers[] = {layers[2], layers[3], layers[0], layers[1], {"head2c", 2 * C, C}};
  const int samples = s.tokens / s.seq_len;
  // CPU time, not real time: on a shared machine the ratio of two CPU times in one process is the
  // steadier measure (run with --benchmark_repetitions and random interleaving, take medians).
  for (const LayerShape& l : exact_layers)
    for (ExactVariant v : {ExactVariant::first, ExactVariant::add, ExactVariant::persample, ExactVariant::cblas})
      benchmark::RegisterBenchmark(
          ("exact_f32/" + std::string(l.layer) + "/" + std::to_string(l.O) + "x" + std::to_string(l.I) + "_S" +
           std::to_string(samples) + "_K" + std::to_string(s.seq_len) + "/" + name(v))
              .c_str(),
          [=](benchmark::State& st) { bench_exact(st, v, l, samples, s.seq_len); })
          ->Unit(benchmark::kMillisecond);
  // Double precision (the test/reference build) on one shape.
  const LayerShape qkv = layers[0];
  const Extents e = extents(Phase::forward, qkv, s.tokens);
  for (Impl i : impls)
    benchmark::RegisterBenchmark(
        ("gemm_f64/qkv_fwd/" + std::to_string(e.M) + "x" + std::to_string(e.N) + "x" + std::to_string(e.K) + "/" +
         name(i))
            .c_str(),
        [=](benchmark::State& st) { bench_gemm<double>(st, i, Phase::forward, qkv, s.tokens); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);

  for (const LayerShape& l : {layers[0], layers[2]})
    for (Phase p : phases)
      for (Mode m : {Mode::deterministic, Mode::fast})
        benchmark::RegisterBenchmark(
            ("linear_f32/" + std::string(l.layer) + "_" + name(p) + "/" + to_string(m)).c_str(),
            [=](benchmark::State& st) { bench_linear<float>(st, m, p, l, s.tokens, s.seq_len); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
}

}  // namespace minipipe::bench
