// Entry point of minipipe_bench_kernels: parses the model shape, initializes Kokkos, records
// which BLAS, OpenBLAS core, Kokkos backend, GEMM microkernel and blocking the numbers come from.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "bench_common.hpp"
#include "kernels/cpu_info.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_blocking.hpp"
#ifdef MINIPIPE_HAVE_CBLAS
#include "minipipe_bench_blas.hpp"  // MINIPIPE_BLAS_NAME (generated)
#endif

#ifdef MINIPIPE_HAVE_OPENBLAS
// OpenBLAS's own queries, declared here so the build does not depend on which cblas.h is found.
extern "C" {
char* openblas_get_corename(void);
char* openblas_get_config(void);
int openblas_get_num_threads(void);
}
#endif

namespace {

// Blocking overrides of the packed GEMM for sweeps (0: the chosen value; gemm_blocking.hpp).
struct BlockingFlags {
  int mc = 0, kc = 0, nc = 0;       // float GEMM
  int exact_mc = 0, exact_kib = 0;  // gemm_det_exact: row block, group budget in KiB
};

// Takes --tokens=, --channels=, --seq-len=, --heads=, --layers= and the blocking overrides
// --gemm-mc=, --gemm-kc=, --gemm-nc=, --exact-mc=, --exact-budget-kib= out of argv (Google Benchmark
// rejects flags it does not know). Returns false on a malformed value.
bool parse_shape(int& argc, char** argv, minipipe::bench::ModelShape& shape, BlockingFlags& blk) {
  struct Flag {
    const char* name;
    int* value;
  };
  const Flag flags[] = {{"--tokens=", &shape.tokens},   {"--channels=", &shape.channels},
                        {"--seq-len=", &shape.seq_len}, {"--heads=", &shape.heads},
                        {"--layers=", &shape.layers},   {"--gemm-mc=", &blk.mc},
                        {"--gemm-kc=", &blk.kc},        {"--gemm-nc=", &blk.nc},
                        {"--exact-mc=", &blk.exact_mc}, {"--exact-budget-kib=", &blk.exact_kib}};
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    bool taken = false;
    for (const Flag& f : flags) {
      const std::size_t n = std::strlen(f.name);
      if (std::strncmp(argv[i], f.name, n) == 0) {
        char* end = nullptr;
        const long v = std::strtol(argv[i] + n, &end, 10);
        if (*end != '\0' || v <= 0 || v > (1 << 24)) {
          std::cerr << "minipipe_bench_kernels: " << f.name << " needs a positive integer, got '" << argv[i] + n
                    << "'\n";
          return false;
        }
        *f.value = static_cast<int>(v);
        taken = true;
      }
    }
    if (!taken) argv[out++] = argv[i];
  }
  argc = out;
  if (shape.channels % shape.heads != 0 || shape.tokens % shape.seq_len != 0) {
    std::cerr << "minipipe_bench_kernels: channels (" << shape.channels << ") must be a multiple of heads ("
              << shape.heads << ") and tokens (" << shape.tokens << ") a multiple of seq-len (" << shape.seq_len
              << ")\n";
    return false;
  }
  return true;
}

void add_context(const minipipe::bench::ModelShape& shape) {
  using benchmark::AddCustomContext;
#ifdef MINIPIPE_BLAS_NAME
  AddCustomContext("blas", MINIPIPE_BLAS_NAME);
#else
  AddCustomContext("blas", "none linked (cblas benchmarks skipped)");
#endif
#ifdef MINIPIPE_HAVE_OPENBLAS
  AddCustomContext("openblas_corename", openblas_get_corename());
  AddCustomContext("openblas_config", openblas_get_config());
  AddCustomContext("openblas_num_threads", std::to_string(openblas_get_num_threads()));
#endif
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  AddCustomContext("OPENBLAS_CORETYPE", coretype ? coretype : "(unset)");
  AddCustomContext("kokkos_version", std::to_string(KOKKOS_VERSION / 10000) + "." +
                                         std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                                         std::to_string(KOKKOS_VERSION % 100));
  AddCustomContext("kokkos_exec_space", minipipe::ExecSpace::name());
  AddCustomContext("kokkos_concurrency", std::to_string(minipipe::ExecSpace().concurrency()));
  AddCustomContext("gemm_det_microkernel", minipipe::gemm_det_microkernel());
  AddCustomContext("gemm_det_simd", minipipe::gemm_det_has_simd() ? "yes" : "no");
  AddCustomContext("gemm_blocking", minipipe::describe(minipipe::gemm_blocking()));
  AddCustomContext("cpu", minipipe::describe(minipipe::host_cpu_info()));
  AddCustomContext("model_shape",
                   "tokens=" + std::to_string(shape.tokens) + " channels=" + std::to_string(shape.channels) +
                       " seq_len=" + std::to_string(shape.seq_len) + " heads=" + std::to_string(shape.heads) +
                       " layers=" + std::to_string(shape.layers));
}

}  // namespace

int main(int argc, char** argv) {
  minipipe::bench::ModelShape shape;
  BlockingFlags blk;
  if (!parse_shape(argc, argv, shape, blk)) return 2;
  minipipe::GemmBlocking b = minipipe::gemm_blocking();
  b.f32.mc = blk.mc > 0 ? blk.mc : b.f32.mc;
  b.f32.kc = blk.kc > 0 ? blk.kc : b.f32.kc;
  b.f32.nc = blk.nc > 0 ? blk.nc : b.f32.nc;
  b.exact_mc = blk.exact_mc > 0 ? blk.exact_mc : b.exact_mc;
  b.exact_budget = blk.exact_kib > 0 ? static_cast<std::size_t>(blk.exact_kib) << 10 : b.exact_budget;
  minipipe::set_gemm_blocking(b);
  Kokkos::initialize(argc, argv);
  int rc = 0;
  {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
      rc = 2;
    } else {
      add_context(shape);
      minipipe::bench::register_gemm_benchmarks(shape);
      minipipe::bench::register_layer_benchmarks(shape);
      benchmark::RunSpecifiedBenchmarks();
    }
    benchmark::Shutdown();
  }
  Kokkos::finalize();
  return rc;
}
