// Host CPU description for the GEMM's blocking choice: cache sizes from sysconf, sysfs or cpuid,
// the build's vector ISA, and the FMA datapath class by CPUID vendor and family.
#include "cpu_info.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

// cpuid only in a host pass on x86 (the device passes of nvcc and hipcc see none of it).
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && (defined(__x86_64__) || defined(__i386__)) && \
    defined(__GNUC__)
#include <cpuid.h>
#define MINIPIPE_HAVE_CPUID 1
#endif

namespace minipipe {
namespace {

#ifdef MINIPIPE_HAVE_CPUID
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
bool cpuid(unsigned leaf, unsigned sub, Regs& r) {
  if (leaf > static_cast<unsigned>(__get_cpuid_max(leaf & 0x80000000u, nullptr)))
    return false;  // int in clang's cpuid.h
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return true;
}
std::string vendor() {
  Regs r;
  if (!cpuid(0, 0, r)) return {};
  char v[13] = {};
  std::memcpy(v, &r.b, 4);
  std::memcpy(v + 4, &r.d, 4);
  std::memcpy(v + 8, &r.c, 4);
  return v;
}
unsigned family() {
  Regs r;
  if (!cpuid(1, 0, r)) return 0;
  const unsigned base = (r.a >> 8) & 0xF;
  return base == 0xF ? base + ((r.a >> 20) & 0xFF) : base;
}
// Deterministic cache parameters (Intel leaf 4, AMD 0x8000001D: the same layout): the size of the
// data or unified cache of `level`, 0 if not listed.
std::size_t cpuid_cache(unsigned leaf, int level) {
  for (unsigned i = 0; i < 16; ++i) {
    Regs r;
    if (!cpuid(leaf, i, r)) return 0;
    const unsigned type = r.a & 0x1F;  // 0: no more caches, 1: data, 2: instruction, 3: unified
    if (type == 0) return 0;
    if ((type == 1 || type == 3) && static_cast<int>((r.a >> 5) & 0x7) == level)
      return std::size_t((r.b >> 22) + 1) * (((r.b >> 12) & 0x3FF) + 1) * ((r.b & 0xFFF) + 1) * (std::size_t(r.c) + 1);
  }
  return 0;
}
#endif

std::size_t sysconf_cache(int level) {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  const long v = sysconf(level == 1   ? _SC_LEVEL1_DCACHE_SIZE
                         : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                                      : _SC_LEVEL3_CACHE_SIZE);
  return v > 0 ? static_cast<std::size_t>(v) : 0;
#else
  (void)level;
  return 0;
#endif
}

// /sys/devices/system/cpu/cpu0/cache/indexN: level, type (Data, Instruction, Unified), size ("48K").
std::size_t sysfs_cache(int level) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(dir + "level"), tf(dir + "type"), sf(dir + "size");
    int lv = 0;
    std::string type, size;
    if (!(lf >> lv) || !(tf >> type) || !(sf >> size)) continue;
    if (lv != level || type == "Instruction") continue;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(size.c_str(), &end, 10);
    const unsigned long long unit = *end == 'K' ? 1024ull : *end == 'M' ? 1024ull * 1024 : *end == 'G' ? 1ull << 30 : 1;
    if (n > 0) return static_cast<std::size_t>(n * unit);
  }
  return 0;
}

CpuInfo detect() {
  CpuInfo cpu;
  cpu.isa = build_isa();
  struct Source {
    const char* name;
    std::size_t (*size)(int);
  };
  const Source sources[] = {
      {"sysconf", &sysconf_cache},
      {"sysfs", &sysfs_cache},
#ifdef MINIPIPE_HAVE_CPUID
      {"cpuid",
       [](int level) {
         const std::size_t amd = vendor() == "AuthenticAMD" ? cpuid_cache(0x8000001Du, level) : 0;
         return amd > 0 ? amd : cpuid_cache(4, level);
       }},
#endif
  };
  // Each size from the first source that knows it; cache_source names the source of L1d and L2.
  std::size_t* const sizes[] = {&cpu.l1d, &cpu.l2, &cpu.l3};
  for (const Source& s : sources) {
    bool used = false;
    for (int level = 1; level <= 3; ++level)
      if (*sizes[level - 1] == 0 && (*sizes[level - 1] = s.size(level)) > 0 && level < 3) used = true;
    if (used) cpu.cache_source += (cpu.cache_source.empty() ? "" : "+") + std::string(s.name);
  }
  if (cpu.cache_source.empty()) cpu.cache_source = "none";
#ifdef MINIPIPE_HAVE_CPUID
  if (cpu.isa == HostIsa::avx512) {
    const std::string v = vendor();
    const unsigned f = family();
    if (v == "AuthenticAMD" && f == 0x19)
      cpu.fma = FmaDatapath::split256;
    else if (v == "AuthenticAMD" && f >= 0x1A)
      cpu.fma = FmaDatapath::native512;
    else if (v == "GenuineIntel")
      cpu.fma = FmaDatapath::native512;
  }
#endif
  return cpu;
}

}  // namespace

const char* to_string(HostIsa isa) {
  return isa == HostIsa::avx512 ? "AVX-512" : isa == HostIsa::avx2 ? "AVX2+FMA" : "scalar";
}

const char* to_string(FmaDatapath d) {
  return d == FmaDatapath::native512  ? "on 512-bit units"
         : d == FmaDatapath::split256 ? "on 256-bit units (512-bit FMAs split)"
                                      : "datapath width unknown";
}

HostIsa build_isa() {
  // The same test as gemm.cpp's microkernel choice (host pass of the build's flags).
#if defined(__AVX512F__)
  return HostIsa::avx512;
#elif defined(__AVX2__) && defined(__FMA__)
  return HostIsa::avx2;
#else
  return HostIsa::scalar;
#endif
}

const CpuInfo& host_cpu_info() {
  static const CpuInfo cpu = detect();
  return cpu;
}

std::string format_bytes(std::size_t bytes) {
  if (bytes == 0) return "?";
  char buf[32];
  if (bytes % (1u << 20) == 0)
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  else if (bytes % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes >> 10);
  else
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  return buf;
}

std::string describe(const CpuInfo& cpu) {
  std::string s = "L1d " + format_bytes(cpu.l1d) + ", L2 " + format_bytes(cpu.l2) + ", L3 " + format_bytes(cpu.l3) +
                  " (" + cpu.cache_source + "), " + to_string(cpu.isa);
  if (cpu.isa == HostIsa::avx512) s += std::string(" ") + to_string(cpu.fma);
  return s;
}

}  // namespace minipipe
