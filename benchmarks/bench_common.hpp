// Shared pieces of the kernel benchmarks: the model shape under test, device buffers with
// reproducible data, and the GFLOP/s / GB/s counters every benchmark reports.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/types.hpp"

namespace minipipe::bench {

// Shape of one transformer block as the benchmarks see it; set from the command line.
struct ModelShape {
  int tokens = 512;    // rows of every activation matrix (B*T)
  int channels = 768;  // C
  int seq_len = 64;    // T: rows per sample (weight-gradient partials, attention)
  int heads = 12;      // H
  int layers = 8;      // blocks whose weights the kept-weight benchmarks cycle through
};

// A MemSpace buffer of n values filled with a fixed pseudo-random pattern in [-1, 1).
template <class T>
View1<T> filled(std::size_t n, std::uint64_t seed, const char* label = "bench_buffer") {
  View1<T> d(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
  auto h = Kokkos::create_mirror_view(d);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    h(i) = static_cast<T>(static_cast<double>(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  }
  Kokkos::deep_copy(d, h);
  return d;
}

// Rates over the measured (real) time: flops and bytes per iteration.
inline void set_rates(benchmark::State& st, double flops_per_iter, double bytes_per_iter) {
  const double it = static_cast<double>(st.iterations());
  if (flops_per_iter > 0)
    st.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * it * 1e-9, benchmark::Counter::kIsRate);
  if (bytes_per_iter > 0)
    st.counters["GB/s"] = benchmark::Counter(bytes_per_iter * it * 1e-9, benchmark::Counter::kIsRate);
}

void register_gemm_benchmarks(const ModelShape& shape);
void register_layer_benchmarks(const ModelShape& shape);

}  // namespace minipipe::bench
