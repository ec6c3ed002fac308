// Which implementation the kernels run: for deterministic kernels the host path (SIMD/packed, host
// memory) or the device path (team kernels shaped for GPUs), the same bits either way (docs/design.md §4);
// for fast mode's GEMMs the vendor BLAS (KokkosBlas::gemm) or miniPipe's own gemm_det tiles.
#pragma once

#include <string>

namespace minipipe {

// automatic: the host path when MemSpace is host-accessible, the device path otherwise.
// device: the GPU-shaped kernels on any backend (tests run them on host backends to compare bits).
// host: the host path; refused when MemSpace is not host-accessible.
enum class KernelPath { automatic, host, device };

const char* to_string(KernelPath p);

// Parses "auto" | "automatic" | "host" | "device"; throws std::invalid_argument naming `where`.
KernelPath parse_kernel_path(const std::string& text, const char* where);

// The process-wide setting every deterministic kernel with two paths honours. The initial value is
// MINIPIPE_KERNEL_PATH from the environment when set (else automatic). Not thread-safe against
// concurrent kernel calls: set it before the kernels run.
void set_kernel_path(KernelPath p);
KernelPath kernel_path();

// Whether the device path runs now (the setting resolved against this build's memory space).
bool use_device_path();

// The GEMMs of fast mode (Linear's forward, backward-input and backward-weight):
// blas: KokkosBlas::gemm (host BLAS, cuBLAS, rocBLAS through Kokkos Kernels' TPLs);
// gemm_det: gemm_det (kernels/gemm.hpp), with the backward-weight as one plain GEMM over all rows;
// automatic: gemm_det on the host path when this build has its SIMD register microkernel (AVX-512F
//   or AVX2+FMA), blas otherwise. Measured side by side, that microkernel runs the model's GEMM
//   shapes at 0.92-1.08x of OpenBLAS's best kernels for the CPU and about 1.8x of the Haswell
//   kernels that some machines preset through OPENBLAS_CORETYPE; on a GPU the vendor BLAS wins.
// The initial value is MINIPIPE_FAST_GEMM from the environment when set (else automatic); set it
// before the kernels run, like the kernel path.
enum class FastGemm { automatic, blas, gemm_det };

const char* to_string(FastGemm g);
// Parses "auto" | "automatic" | "blas" | "gemm_det"; throws std::invalid_argument naming `where`.
FastGemm parse_fast_gemm(const std::string& text, const char* where);
void set_fast_gemm(FastGemm g);
FastGemm fast_gemm();
// Whether fast mode's GEMMs run on gemm_det now (the setting resolved against path and build).
bool fast_gemm_on_gemm_det();

}  // namespace minipipe
