// LayerNorm and GELU (GB/s) and causal attention (GFLOP/s) forward/backward benchmarks on the model
// shape, both modes, the memory bandwidth (a triad, GB/s) and the fixed cost of a kernel. LayerNorm
// and attention are compiled in only once their headers exist.
#include <algorithm>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kernels/gelu.hpp"

#if __has_include("kernels/layernorm.hpp")
#include "kernels/layernorm.hpp"
#define MINIPIPE_BENCH_LAYERNORM 1
#endif
#if __has_include("kernels/attention.hpp")
#include "kernels/attention.hpp"
#define MINIPIPE_BENCH_ATTENTION 1
#endif

namespace minipipe::bench {
namespace {

const Mode kModes[] = {Mode::deterministic, Mode::fast};

#ifdef MINIPIPE_BENCH_LAYERNORM
enum class LnPass { forward, backward_input, backward_weight };
const char* name(LnPass p) {
  return p == LnPass::forward ? "fwd" : p == LnPass::backward_input ? "bwd_input" : "bwd_weight";
}

// Bytes are the compulsory traffic: forward reads x and writes out; backward-input reads x and
// dout and writes dx; backward-weight reads x and dout into the gradient accumulators of w and b,
// one deterministic exact add per sample of `seq_len` rows (weights, mean, rstd and the
// accumulators are O(N + C) and left out).
template <class T>
void bench_layernorm(benchmark::State& st, Mode mode, LnPass pass, int N, int C, int seq_len) {
  const auto x = filled<T>(static_cast<std::size_t>(N) * C, 1);
  const auto w = filled<T>(static_cast<std::size_t>(C), 2);
  const auto b = filled<T>(static_cast<std::size_t>(C), 3);
  const auto dout = filled<T>(static_cast<std::size_t>(N) * C, 4);
  View2<T> out("ln_out", N, C), dx("ln_dx", N, C);
  View1<T> mean("ln_mean", N), rstd("ln_rstd", N);
  const CMat<T> xm(x.data(), N, C), doutm(dout.data(), N, C);
  GradAccum<T> dw("bench_ln_w", static_cast<std::size_t>(C), mode), db("bench_ln_b", static_cast<std::size_t>(C), mode);
  dw.zero();
  db.zero();
  LayerNorm<T>::forward(mode, xm, w, b, out, mean, rstd);  // mean/rstd for the backward, warm-up
  fence("bench::layernorm");
  for (auto _ : st) {
    if (pass == LnPass::backward_input)
      LayerNorm<T>::backward_input(mode, xm, w, mean, rstd, doutm, dx);
    else if (pass == LnPass::backward_weight)
      LayerNorm<T>::backward_weight(mode, xm, mean, rstd, doutm, seq_len, dw, db);
    else
      LayerNorm<T>::forward(mode, xm, w, b, out, mean, rstd);
    fence("bench::layernorm");
  }
  const double arrays = pass == LnPass::backward_input ? 3.0 : 2.0;  // (N, C) arrays read or written
  set_rates(st, 0, arrays * N * C * sizeof(T));
}
#endif

// GELU over the MLP's hidden activations (tokens, 4C), inputs spread over [-4, 4) as a trained
// block's are. Bytes: forward reads x and writes y; backward-input reads x and dy, writes dx.
template <class T>
void bench_gelu(benchmark::State& st, Mode mode, bool backward, std::size_t n) {
  const auto x = filled<T>(n, 5);
  Kokkos::parallel_for(
      "bench::gelu_scale", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const std::size_t i) { x(i) *= T(4); });
  const auto dy = filled<T>(n, 6);
  View1<T> y("gelu_y", n), dx("gelu_dx", n);
  fence("bench::gelu");
  for (auto _ : st) {
    if (backward)
      Gelu<T>::backward_input(mode, x, dy, dx);
    else
      Gelu<T>::forward(mode, x, y);
    fence("bench::gelu");
  }
  set_rates(st, 0, (backward ? 3.0 : 2.0) * n * sizeof(T));
}

// The machine's memory bandwidth on the Kokkos backend's threads, the rate that a memory-bound
// kernel (packs, GELU, AdamW) can reach: a STREAM-style triad c = a + s b over three arrays of n
// floats, each larger than any cache. Bytes: STREAM's count, two reads and one write per element
// (the write-allocate read of c is not counted). e2e_speed.py --threads compares 1 and N threads.
void bench_stream_triad(benchmark::State& st, std::size_t n) {
  const auto a = filled<float>(n, 7);
  const auto b = filled<float>(n, 8);
  View1<float> c("triad_c", n);
  const float s = 1.5f;
  fence("bench::triad");
  for (auto _ : st) {
    Kokkos::parallel_for(
        "bench::triad", Kokkos::RangePolicy<ExecSpace>(0, n),
        KOKKOS_LAMBDA(const std::size_t i) { c(i) = a(i) + s * b(i); });
    fence("bench::triad");
  }
  set_rates(st, 0, 3.0 * n * sizeof(float));
}

// The fixed cost of one kernel on the backend: a parallel_for with one item per thread (each
// writes one float) and its fence, the time per iteration. Host kernels split into several
// parallel_fors (a GEMM block's B pack, A pack and tiles) pay it once each; on the OpenMP backend
// it is a parallel region's start and end.
void bench_dispatch(benchmark::State& st) {
  const int n = std::max(1, ExecSpace().concurrency());
  View1<float> out("dispatch_out", static_cast<std::size_t>(n) * 16);
  for (auto _ : st) {
    Kokkos::parallel_for(
        "bench::dispatch", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const int i) { out(i * 16) += 1.0f; });
    fence("bench::dispatch");
  }
}

// What the same phases cost inside one host parallel region: a team of all the host threads runs
// kPhases phases of one item per thread, each ended by a team barrier; the counter s/phase is the
// time of one phase (compare bench_dispatch's time per iteration at the same thread count).
void bench_team_phases(benchmark::State& st) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Team = Kokkos::TeamPolicy<Host>;
  constexpr int kPhases = 1000;
  std::vector<float> out(static_cast<std::size_t>(std::max(1, Host().concurrency())) * 16);
  float* const o = out.data();
  int n = 1;  // the team's size, set below: every host thread up to the backend's team limit
  const auto body = [=, &n](const Team::member_type& team) {
    for (int ph = 0; ph < kPhases; ++ph) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const int i) { o[i * 16] += 1.0f; });
      team.team_barrier();
    }
  };
  n = std::max(1, std::min(Host().concurrency(), Team(1, 1).team_size_max(body, Kokkos::ParallelForTag())));
  st.counters["threads"] = n;
  for (auto _ : st) {
    Kokkos::parallel_for("bench::team_phases", Team(1, n), body);
    Host().fence();
  }
  st.counters["s/phase"] =
      benchmark::Counter(kPhases, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  benchmark::DoNotOptimize(out.data());
}

#ifdef MINIPIPE_BENCH_ATTENTION
// Causal FLOPs: per (sample, head) the T(T+1)/2 allowed pairs each cost hd multiply-adds in
// q·k and hd in att·v, i.e. 2·hd·T(T+1) flops forward; backward has four such products
// (d_att, d_v, d_q, d_k), twice the forward. Softmax work is not counted.
template <class T>
void bench_attention(benchmark::State& st, Mode mode, bool backward, const ModelShape& s) {
  const int Tn = s.seq_len, C = s.channels, H = s.heads, B = s.tokens / s.seq_len;
  const std::size_t rows = static_cast<std::size_t>(B) * Tn;
  const auto qkv = filled<T>(rows * 3 * C, 1);
  const auto dout = filled<T>(rows * C, 2);
  View2<T> att("att", static_cast<std::size_t>(B) * H * Tn, Tn), out("att_out", rows, C), dqkv("dqkv", rows, 3 * C);
  const CMat<T> qkvm(qkv.data(), rows, 3 * C), doutm(dout.data(), rows, C);
  Attention<T>::forward(mode, B, Tn, C, H, qkvm, att, out);
  fence("bench::attention");
  for (auto _ : st) {
    if (backward)
      Attention<T>::backward_input(mode, B, Tn, C, H, qkvm, att, doutm, dqkv);
    else
      Attention<T>::forward(mode, B, Tn, C, H, qkvm, att, out);
    fence("bench::attention");
  }
  const double hd = static_cast<double>(C) / H;
  const double fwd = 2.0 * hd * Tn * (Tn + 1.0) * B * H;
  set_rates(st, backward ? 2.0 * fwd : fwd, 0);
}
#endif

}  // namespace

void register_layer_benchmarks(const ModelShape& s) {
#ifdef MINIPIPE_BENCH_LAYERNORM
  for (Mode m : kModes)
    for (LnPass p : {LnPass::forward, LnPass::backward_input, LnPass::backward_weight})
      benchmark::RegisterBenchmark(
          (std::string("layernorm_f32/") + name(p) + "/" + std::to_string(s.tokens) + "x" + std::to_string(s.channels) +
           "/" + to_string(m))
              .c_str(),
          [=](benchmark::State& st) { bench_layernorm<float>(st, m, p, s.tokens, s.channels, s.seq_len); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
#endif
  const std::size_t hidden = static_cast<std::size_t>(s.tokens) * 4 * s.channels;
  for (Mode m : kModes)
    for (bool bwd : {false, true})
      benchmark::RegisterBenchmark(
          (std::string("gelu_f32/") + (bwd ? "bwd_input/" : "fwd/") + std::to_string(s.tokens) + "x" +
           std::to_string(4 * s.channels) + "/" + to_string(m))
              .c_str(),
          [=](benchmark::State& st) { bench_gelu<float>(st, m, bwd, hidden); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  constexpr std::size_t kTriad = std::size_t(1) << 24;  // 64 MiB per array
  benchmark::RegisterBenchmark(("stream_f32/triad/" + std::to_string(kTriad)).c_str(),
                               [=](benchmark::State& st) { bench_stream_triad(st, kTriad); })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("dispatch/parallel_for", bench_dispatch)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("dispatch/team_phases", bench_team_phases)->UseRealTime()->Unit(benchmark::kMicrosecond);
#ifdef MINIPIPE_BENCH_ATTENTION
  for (Mode m : kModes)
    for (bool bwd : {false, true})
      benchmark::RegisterBenchmark((std::string("attention_f32/") + (bwd ? "bwd_input/" : "fwd/") + "B" +
                                    std::to_string(s.tokens / s.seq_len) + "_T" + std::to_string(s.seq_len) + "_C" +
                                    std::to_string(s.channels) + "_H" + std::to_string(s.heads) + "/" + to_string(m))
                                       .c_str(),
                                   [=](benchmark::State& st) { bench_attention<float>(st, m, bwd, s); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
#endif
#if !defined(MINIPIPE_BENCH_LAYERNORM) || !defined(MINIPIPE_BENCH_ATTENTION)
  benchmark::AddCustomContext("layer_benchmarks",
#ifdef MINIPIPE_BENCH_LAYERNORM
                              "attention.hpp missing at build time: attention not benchmarked"
#elif defined(MINIPIPE_BENCH_ATTENTION)
                              "layernorm.hpp missing at build time: layernorm not benchmarked"
#else
                              "layernorm.hpp and attention.hpp missing at build time: not benchmarked"
#endif
  );
#endif
  (void)kModes;
  (void)s;
}

}  // namespace minipipe::bench
