// The packed GEMM's cache blocking from the CPU's cache sizes (BLIS's analytical rules), and the
// process-wide choice that kernels/gemm.cpp reads.
#include "gemm_blocking.hpp"

#include <algorithm>

namespace minipipe {
namespace {

// The blocking built in before it was chosen per CPU (tuned on 1 MiB-L2 AVX-512 cores); used when
// the cache sizes are unknown.
GemmBlocking builtin(HostIsa isa) {
  GemmBlocking b;
  b.f32 = register_tile_f32(isa);
  b.f64 = register_tile_f64(isa);
  const bool wide = isa == HostIsa::avx512;
  b.f32.mc = wide ? 192 : 168, b.f32.kc = 256, b.f32.nc = wide ? 4096 : 4080;
  b.f64.mc = wide ? 96 : 72, b.f64.kc = 256, b.f64.nc = wide ? 4096 : 4080;
  b.exact_mc = b.f32.mc, b.exact_nc = 1024, b.exact_budget = std::size_t(768) << 10;
  b.assumed = true;
  return b;
}

std::size_t floor_to(std::size_t v, std::size_t step) {
  return v / step * step;
}

// The rules, for a tile MR x NR of s-byte values (the microkernel broadcasts A and loads B; for each
// B micro-panel the tiles walk all A micro-panels of the L2 block, so the B micro-panel is the one
// that L1 keeps and A streams from L2):
//   KC: the KC x NR micro-panel of B fills about two thirds of L1d; the rest holds the A micro-panel
//       passing through (MR x KC) and the C tile. A multiple of 16 (the packers transpose 16 k at a
//       time), 64..512. BLIS's Zen 4 sgemm keeps its 12-wide micro-panel (KC 480) in the same 70% of
//       L1; here the panel is 32 floats wide, so Zen 4's 32 KiB gives KC 160 and Zen 5's 48 KiB 256.
//       On the Zen 5 core KC 256 ran the model's GEMMs 1-2% faster than the half-L1 rule's 192 in
//       each of three sweeps (minipipe_bench_kernels --gemm-kc, ratios over the same process's sgemm).
//   MC: the MC x KC block of A, re-read for every B micro-panel, fills about half of L2; the rest
//       holds the B micro-panels passing through and the C tiles. A multiple of MR, at most 32 MR:
//       on the Zen 5 core MC 192 to 504 at KC 256 (384 and 672 at KC 192) ran level within the
//       noise, and 384 still gives a 1024-row GEMM three row blocks to share among threads.
//   NC: the KC x NC block of B fills about half of L3, at most 4096 columns (the model's widest
//       GEMM is 4C; a guest may report a whole socket's L3); 4096 when L3 is unknown. A multiple of NR.
// A call then splits its K into equal k-blocks of at most KC (kernels/gemm.cpp), so K = 256 with
// KC = 160 runs two blocks of 128, not 160 + 96.
GemmBlocks blocks(GemmBlocks t, std::size_t s, const CpuInfo& cpu) {
  const std::size_t kc = floor_to(cpu.l1d * 2 / 3 / (t.nr * s), 16);
  t.kc = static_cast<int>(std::clamp<std::size_t>(kc, 64, 512));
  const std::size_t mc = floor_to(cpu.l2 / 2 / (t.kc * s), t.mr);
  t.mc = static_cast<int>(std::clamp<std::size_t>(mc, t.mr, 32 * std::size_t(t.mr)));
  const std::size_t nc = cpu.l3 > 0 ? floor_to(cpu.l3 / 2 / (t.kc * s), t.nr) : 4096;
  t.nc = static_cast<int>(std::clamp<std::size_t>(nc, 8 * std::size_t(t.nr), floor_to(4096, t.nr)));
  return t;
}

GemmBlocking& active() {
  static GemmBlocking b = choose_gemm_blocking(host_cpu_info());
  return b;
}

}  // namespace

GemmBlocks register_tile_f32(HostIsa isa) {
  GemmBlocks t;
  t.mr = isa == HostIsa::avx512 ? 12 : 6;
  t.nr = isa == HostIsa::avx512 ? 32 : 16;
  return t;
}

GemmBlocks register_tile_f64(HostIsa isa) {
  GemmBlocks t;
  t.mr = isa == HostIsa::avx512 ? 12 : 6;
  t.nr = isa == HostIsa::avx512 ? 16 : 8;
  return t;
}

GemmBlocking choose_gemm_blocking(const CpuInfo& cpu) {
  GemmBlocking b = builtin(cpu.isa);
  if (cpu.l1d == 0 || cpu.l2 == 0) return b;
  b.assumed = false;
  b.f32 = blocks(b.f32, sizeof(float), cpu);
  b.f64 = blocks(b.f64, sizeof(double), cpu);
  // gemm_det_exact: a group's packed A (g samples x exact_mc rows x K) is re-read for every B
  // micro-panel and should stay in L2 beside one unit's B panels (g x K x NR) and limb sums: three
  // quarters of L2. On the Zen 5 core (model shapes, T = 128, 8 samples) budgets of 256 and 512 KiB
  // (groups of 2 and 5) ran 0.62 and 0.69 of sgemm, 768 KiB (all 8) 0.71. The row block stays the
  // built-in one: 96 rows ran level with it, 384 lower (0.66).
  b.exact_budget = cpu.l2 / 4 * 3;
  return b;
}

const GemmBlocking& gemm_blocking() {
  return active();
}

void set_gemm_blocking(const GemmBlocking& b) {
  active() = b;
}

int exact_group_for(const GemmBlocking& b, int K) {
  const std::size_t a_sample = static_cast<std::size_t>(std::max(K, 1)) * std::max(b.exact_mc, 1) * sizeof(float);
  const std::size_t g = b.exact_budget / a_sample;
  return static_cast<int>(std::clamp<std::size_t>(g, 1, 1u << 20));
}

std::string describe(const GemmBlocking& b) {
  auto one = [](const char* type, const GemmBlocks& t) {
    return std::string(type) + " tile " + std::to_string(t.mr) + "x" + std::to_string(t.nr) + ", MC " +
           std::to_string(t.mc) + " KC " + std::to_string(t.kc) + " NC " + std::to_string(t.nc);
  };
  return one("float", b.f32) + "; " + one("double", b.f64) + "; exact MC " + std::to_string(b.exact_mc) + " NC " +
         std::to_string(b.exact_nc) + ", group budget " + format_bytes(b.exact_budget) +
         (b.assumed ? " (cache sizes unknown: built-in blocking)" : "");
}

}  // namespace minipipe
