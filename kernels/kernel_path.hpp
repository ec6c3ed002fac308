// Which implementation the deterministic kernels run: the host path (SIMD/packed, host memory) or
// the device path (team kernels shaped for GPUs). Both give the same bits (DESIGN.md §4).
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

}  // namespace minipipe
