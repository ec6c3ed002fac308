// What the host CPU offers the packed GEMM: per-core cache sizes, the vector ISA this binary's
// microkernels use and how wide its FMA datapath is; read once per process (host code only).
#pragma once

#include <cstddef>
#include <string>

namespace minipipe {

// The SIMD instruction set the packed GEMM of this build uses (fixed at compile time).
enum class HostIsa { scalar, avx2, avx512 };

// How the core executes a 512-bit FMA: on native 512-bit units, or split into two 256-bit halves
// (AMD Zen 4). unknown: not an AVX-512 build, not x86, or a vendor the rule below does not cover.
enum class FmaDatapath { unknown, split256, native512 };

const char* to_string(HostIsa isa);
const char* to_string(FmaDatapath d);

struct CpuInfo {
  std::size_t l1d = 0, l2 = 0, l3 = 0;  // bytes, as the OS or cpuid reports them; 0 = unknown
  HostIsa isa = HostIsa::scalar;
  FmaDatapath fma = FmaDatapath::unknown;
  std::string cache_source;  // where the sizes came from: sysconf, sysfs, cpuid or none
};

// The host this process runs on, detected on the first call.
// Cache sizes: sysconf(_SC_LEVEL*_CACHE_SIZE) (glibc, which reads cpuid itself), else
// /sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}, else cpuid leaf 4 (Intel) or
// 0x8000001D (AMD) on x86; a size none of them gives stays 0.
// FMA datapath, by feature (CPUID family and vendor), only when the build uses AVX-512:
//   AMD family 0x19 (Zen 4): split256;  AMD family >= 0x1A (Zen 5, which adds AVX512_VP2INTERSECT):
//   native512;  Intel with AVX-512: native512 (every Intel AVX-512 core has a 512-bit FMA unit).
// Limits: Zen 5 mobile parts (Strix Point and kin) report family 0x1A and the same features but
// run 512-bit FMAs on 256-bit units, and some Intel client cores have one 512-bit FMA port where
// servers have two; neither is told apart here. The result only labels the report: the blocking
// rules (gemm_blocking.hpp) read the cache sizes, not the datapath.
const CpuInfo& host_cpu_info();

// The ISA this build's packed GEMM uses.
HostIsa build_isa();

// "L1d 48 KiB, L2 1 MiB, L3 32 MiB (sysconf), AVX-512 on 512-bit units".
std::string describe(const CpuInfo& cpu);

// 49152 -> "48 KiB", 1048576 -> "1 MiB", 0 -> "?".
std::string format_bytes(std::size_t bytes);

}  // namespace minipipe
