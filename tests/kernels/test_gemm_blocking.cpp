// The packed GEMM's cache blocking (kernels/gemm_blocking.hpp): every entry point gives the same
// bits under every blocking, the choices for the described CPU classes included, and the chooser's
// output for those classes is the table worked out by hand from its rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

#include "buffers.hpp"
#include "kernels/gemm.hpp"

namespace minipipe {
namespace {

using test::random_values;
using test::to_device;
using test::to_host;

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

CpuInfo described(std::size_t l1d, std::size_t l2, std::size_t l3, HostIsa isa, FmaDatapath fma) {
  CpuInfo c;
  c.l1d = l1d, c.l2 = l2, c.l3 = l3, c.isa = isa, c.fma = fma, c.cache_source = "described";
  return c;
}
// The classes this project meets (L3 as one CCD or ring holds it).
CpuInfo zen4() {
  return described(32 * KiB, 1 * MiB, 32 * MiB, HostIsa::avx512, FmaDatapath::split256);
}
CpuInfo zen5() {
  return described(48 * KiB, 1 * MiB, 32 * MiB, HostIsa::avx512, FmaDatapath::native512);
}
CpuInfo avx2_client() {  // Skylake-class client core: 32 KiB L1d, 256 KiB L2, 8 MiB L3
  return described(32 * KiB, 256 * KiB, 8 * MiB, HostIsa::avx2, FmaDatapath::unknown);
}
CpuInfo unknown_caches() {  // sysconf, sysfs and cpuid all report 0
  return described(0, 0, 0, HostIsa::avx512, FmaDatapath::unknown);
}

// ---- The chooser against values worked out by hand ------------------------------------------

struct Expect {
  const char* cpu;
  CpuInfo info;
  GemmBlocks f32, f64;
  int exact_mc, exact_nc;
  std::size_t exact_budget;
  bool assumed;
};

// The rules (gemm_blocking.cpp): KC = 16 floor(2/3 L1d / (NR s) / 16) in [64, 512];
// MC = MR floor(L2 / 2 / (KC s) / MR) in [MR, 32 MR]; NC = NR floor(L3 / 2 / (KC s) / NR) in
// [8 NR, 4096]; exact budget 3/4 L2, exact rows the built-in 192 (AVX-512) or 168.
TEST(GemmBlockingChooser, TableOfDescribedCpus) {
  const Expect table[] = {
      // Zen 4: float KC 21845 / 128 = 170 -> 160, MC 524288 / 640 = 819 -> 32 MR = 384, NC 16 MiB /
      // 640 -> 4096; double (12 x 16 x 8 B) the same KC, MC 524288 / 1280 = 409 -> 384, NC 4096.
      {"zen4", zen4(), {12, 32, 384, 160, 4096}, {12, 16, 384, 160, 4096}, 192, 1024, 768 * KiB, false},
      // Zen 5: float KC 32768 / 128 = 256, MC 524288 / 1024 = 512 -> 384; double the same KC, MC
      // 524288 / 2048 = 256 -> 252.
      {"zen5", zen5(), {12, 32, 384, 256, 4096}, {12, 16, 252, 256, 4096}, 192, 1024, 768 * KiB, false},
      // AVX2 6 x 16: float KC 21845 / 64 = 341 -> 336, MC 131072 / 1344 = 97 -> 96, NC 4 MiB / 1344 =
      // 3120; double 6 x 8 the same KC, MC 131072 / 2688 = 48, NC 4 MiB / 2688 = 1560.
      {"avx2", avx2_client(), {6, 16, 96, 336, 3120}, {6, 8, 48, 336, 1560}, 168, 1024, 192 * KiB, false},
      // Nothing known: the built-in blocking.
      {"unknown", unknown_caches(), {12, 32, 192, 256, 4096}, {12, 16, 96, 256, 4096}, 192, 1024, 768 * KiB, true},
  };
  auto same = [](const GemmBlocks& a, const GemmBlocks& b) {
    return a.mr == b.mr && a.nr == b.nr && a.mc == b.mc && a.kc == b.kc && a.nc == b.nc;
  };
  for (const Expect& e : table) {
    SCOPED_TRACE(e.cpu);
    const GemmBlocking b = choose_gemm_blocking(e.info);
    SCOPED_TRACE(describe(b));
    EXPECT_TRUE(same(b.f32, e.f32));
    EXPECT_TRUE(same(b.f64, e.f64));
    EXPECT_EQ(b.exact_mc, e.exact_mc);
    EXPECT_EQ(b.exact_nc, e.exact_nc);
    EXPECT_EQ(b.exact_budget, e.exact_budget);
    EXPECT_EQ(b.assumed, e.assumed);
    // Deterministic: the same description gives the same choice.
    const GemmBlocking again = choose_gemm_blocking(e.info);
    EXPECT_TRUE(same(again.f32, b.f32) && same(again.f64, b.f64) && again.exact_budget == b.exact_budget);
    // Sane whatever the rules: blocks are whole tiles and the group holds at least one sample.
    for (const GemmBlocks* t : {&b.f32, &b.f64}) {
      EXPECT_EQ(t->mc % t->mr, 0);
      EXPECT_EQ(t->nc % t->nr, 0);
      EXPECT_GE(t->kc, 16);
    }
    EXPECT_GE(exact_group_for(b, 1 << 20), 1);
  }
  // The group of the model's backward-weight (K = T = 128): 768 KiB / (128 x 192 x 4) = 8 samples.
  EXPECT_EQ(exact_group_for(choose_gemm_blocking(zen5()), 128), 8);
}

TEST(GemmBlockingChooser, HostDescriptionIsPrinted) {
  const CpuInfo& cpu = host_cpu_info();
  EXPECT_EQ(cpu.isa, build_isa());
  const GemmBlocking& b = gemm_blocking();
  // The chooser's tile is the microkernel's (gemm.cpp's Tile, named in gemm_det_microkernel()).
  const std::string tile = std::to_string(b.f32.mr) + "x" + std::to_string(b.f32.nr);
  EXPECT_NE(std::string(gemm_det_microkernel()).find(tile + " (float)"), std::string::npos) << gemm_det_microkernel();
  const std::string tile64 = std::to_string(b.f64.mr) + "x" + std::to_string(b.f64.nr);
  EXPECT_NE(std::string(gemm_det_microkernel()).find(tile64 + " (double)"), std::string::npos)
      << gemm_det_microkernel();
  std::cout << "host: " << describe(cpu) << "\nblocking: " << describe(b) << "\n";
}

// ---- Bits of every entry point under a sweep of blockings -----------------------------------

constexpr bool kHost = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

// Sets the process's blocking for one scope.
struct BlockingScope {
  GemmBlocking saved = gemm_blocking();
  explicit BlockingScope(const GemmBlocking& b) { set_gemm_blocking(b); }
  ~BlockingScope() { set_gemm_blocking(saved); }
};

// The blockings to sweep: the chosen ones for each described class (with this build's tile: the
// tile is fixed at compile time) and small ones that cut the test shapes into many blocks,
// k-blocks of 1 and 7 included, and exact groups of one sample.
std::vector<std::pair<std::string, GemmBlocking>> sweep() {
  std::vector<std::pair<std::string, GemmBlocking>> v;
  const HostIsa isa = build_isa();
  for (auto [name, cpu] : {std::pair<const char*, CpuInfo>{"zen4", zen4()},
                           {"zen5", zen5()},
                           {"avx2", avx2_client()},
                           {"unknown", unknown_caches()}}) {
    cpu.isa = isa;  // the class's caches on this build's tile
    const GemmBlocking b = choose_gemm_blocking(cpu);
    v.emplace_back(name, b);
  }
  struct Small {
    const char* name;
    int mc, kc, nc, exact_mc, exact_nc;
    std::size_t budget;
  };
  const Small smalls[] = {{"tiny", 1, 7, 1, 1, 1, 1},
                          {"k1", 2, 1, 3, 2, 2, 4 * KiB},
                          {"k16", 3, 16, 2, 3, 3, 16 * KiB},
                          {"k50", 5, 50, 4, 5, 4, 64 * KiB}};
  for (const Small& s : smalls) {
    GemmBlocking b = gemm_blocking();
    for (GemmBlocks* t : {&b.f32, &b.f64}) t->mc = s.mc * t->mr, t->kc = s.kc, t->nc = s.nc * t->nr;
    b.exact_mc = s.exact_mc * b.f32.mr, b.exact_nc = s.exact_nc * b.f32.nr, b.exact_budget = s.budget;
    v.emplace_back(s.name, b);
  }
  return v;
}

// Operands of the GEMM tests: A (M,K) and B (K,N) in padded buffers, read as given or transposed.
template <class T>
struct Operands {
  int M, N, K;
  bool at, bt;
  std::ptrdiff_t lda, ldb, ldc;
  View1<T> a, b, bias, c0;
  Operands(int m, int n, int k, bool a_t, bool b_t, std::uint64_t seed) : M(m), N(n), K(k), at(a_t), bt(b_t) {
    lda = at ? M + 1 : K + 3, ldb = bt ? K + 2 : N + 1, ldc = N + 3;
    a = to_device(random_values<T>(static_cast<std::size_t>(at ? K : M) * lda, seed));
    b = to_device(random_values<T>(static_cast<std::size_t>(bt ? N : K) * ldb, seed + 1));
    bias = to_device(random_values<T>(static_cast<std::size_t>(N), seed + 2));
    c0 = to_device(random_values<T>(static_cast<std::size_t>(M) * ldc, seed + 3));
  }
  StridedMat<T> A() const { return at ? transposed(a.data(), lda) : row_major(a.data(), lda); }
  StridedMat<T> B() const { return bt ? transposed(b.data(), ldb) : row_major(b.data(), ldb); }
};

// Every output of the GEMM entry points for one blocking, concatenated as bytes.
template <class T>
std::vector<unsigned char> gemm_outputs(const GemmOptions& opt, KernelWorkspace& ws) {
  std::vector<unsigned char> bytes;
  auto keep = [&bytes](const std::vector<T>& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(T));
  };
  // Forward (B transposed), backward-input (both as stored), backward-weight (A transposed), with K
  // past every chosen KC so each blocking cuts it into a different number of k-blocks.
  const bool transposes[][2] = {{false, true}, {false, false}, {true, false}};
  std::uint64_t seed = 100;
  for (const auto& t : transposes) {
    const Operands<T> o(75, 70, 300, t[0], t[1], seed += 10);
    for (GemmOut out : {GemmOut::overwrite, GemmOut::accumulate, GemmOut::chain_on_c})
      for (bool with_bias : {false, true}) {
        if (with_bias && out != GemmOut::overwrite) continue;
        View1<T> c("blocking_c", o.c0.extent(0));
        Kokkos::deep_copy(c, o.c0);
        gemm_det<T>(ws, opt, o.M, o.N, o.K, o.A(), o.B(), c.data(), o.ldc, with_bias ? o.bias.data() : nullptr, out);
        keep(to_host(c));
      }
    View1<T> c("blocking_c", o.c0.extent(0)), rs("blocking_rs", o.M);
    Kokkos::deep_copy(c, o.c0);
    gemm_det_row_sums<T>(ws, opt, o.M, o.N, o.K, o.A(), o.B(), c.data(), o.ldc, GemmOut::overwrite, rs.data());
    keep(to_host(c));
    keep(to_host(rs));
    // A weight kept packed across calls (PackedB): packed under this blocking, then reused.
    PackedB<T> packed;
    packed.enable();
    for (int pass = 0; pass < 2; ++pass) {
      View1<T> ck("blocking_c", o.c0.extent(0));
      gemm_det<T>(ws, opt, o.M, o.N, o.K, o.A(), o.B(), ck.data(), o.ldc, nullptr, GemmOut::overwrite, &packed);
      keep(to_host(ck));
    }
  }
  return bytes;
}

// gemm_det_batched (no options: the process's blocking), with and without the row sums.
template <class T>
std::vector<unsigned char> batched_outputs(KernelWorkspace& ws) {
  const int S = 3, M = 37, N = 45, K = 300;
  const auto a = to_device(random_values<T>(static_cast<std::size_t>(S) * K * M, 7));
  const auto b = to_device(random_values<T>(static_cast<std::size_t>(S) * K * N, 8));
  const auto c0 = to_device(random_values<T>(static_cast<std::size_t>(S) * M * N, 9));
  std::vector<unsigned char> bytes;
  for (bool rows : {false, true})
    for (GemmOut out : {GemmOut::overwrite, GemmOut::accumulate}) {
      View1<T> c("batched_c", c0.extent(0)), rs("batched_rs", static_cast<std::size_t>(S) * M);
      Kokkos::deep_copy(c, c0);
      gemm_det_batched<T>(ws, S, M, N, K, transposed(a.data(), M), static_cast<std::ptrdiff_t>(K) * M,
                          row_major(b.data(), N), static_cast<std::ptrdiff_t>(K) * N, c.data(),
                          static_cast<std::ptrdiff_t>(M) * N, N, out, rows ? rs.data() : nullptr, M);
      for (const auto& v : {to_host(c), to_host(rs)}) {
        const auto* p = reinterpret_cast<const unsigned char*>(v.data());
        bytes.insert(bytes.end(), p, p + v.size() * sizeof(T));
      }
    }
  return bytes;
}

// gemm_det_exact's raw accumulators (weights and row sums), two calls into the same targets.
std::vector<unsigned char> exact_outputs(const GemmOptions& opt, KernelWorkspace& ws) {
  const int M = 40, N = 70, K = 33, S = 11;
  const auto dy = to_device(random_values<float>(static_cast<std::size_t>(S) * K * M, 21));
  const auto x = to_device(random_values<float>(static_cast<std::size_t>(S) * K * N, 22));
  const ExactTarget w{ExactView("blocking_exact_w", static_cast<std::size_t>(M) * N), FlagView("blocking_w_ov"), true};
  const ExactTarget r{ExactView("blocking_exact_r", static_cast<std::size_t>(M)), FlagView("blocking_r_ov"), true};
  const int split = 4;  // samples [0, 4) then [4, 11); the second call adds to what the first stored
  for (int call = 0; call < 2; ++call) {
    const int s0 = call == 0 ? 0 : split, s1 = call == 0 ? split : S;
    ExactTarget wt = w, rt = r;
    wt.known_zero = rt.known_zero = call == 0;
    gemm_det_exact(ws, opt, M, N, K, s1 - s0, transposed(dy.data() + static_cast<std::size_t>(s0) * K * M, M),
                   static_cast<std::ptrdiff_t>(K) * M, row_major(x.data() + static_cast<std::size_t>(s0) * K * N, N),
                   static_cast<std::ptrdiff_t>(K) * N, wt, &rt);
  }
  std::vector<unsigned char> bytes;
  for (const ExactView& v : {w.exact, r.exact}) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    const auto* p = reinterpret_cast<const unsigned char*>(h.data());
    bytes.insert(bytes.end(), p, p + h.extent(0) * sizeof(Fixed128));
  }
  return bytes;
}

std::vector<GemmPath> packed_paths() {
  std::vector<GemmPath> v{GemmPath::packed_scalar};
  if (gemm_det_has_simd()) v.push_back(GemmPath::packed_simd);
  return v;
}

// Position of the first differing byte, for the failure message.
std::string first_difference(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return "byte " + std::to_string(i) + " of " + std::to_string(a.size());
  return "none";
}

// The process's blocking replaced (every entry point reads it; gemm_det_batched has no options).
template <class T>
void check_process_blockings() {
  if (!kHost) GTEST_SKIP() << "the packed host path needs host-accessible memory";
  KernelWorkspace ws;
  for (GemmPath path : packed_paths()) {
    GemmOptions opt;
    opt.path = path;
    const auto ref = gemm_outputs<T>(opt, ws);
    const auto ref_batched = batched_outputs<T>(ws);
    const auto ref_exact = std::is_same<T, float>::value ? exact_outputs(opt, ws) : std::vector<unsigned char>{};
    for (const auto& [name, b] : sweep()) {
      SCOPED_TRACE(name + ": " + describe(b));
      const BlockingScope scope(b);
      const auto got = gemm_outputs<T>(opt, ws);
      EXPECT_TRUE(got == ref) << "gemm_det: first difference at " << first_difference(got, ref);
      const auto got_batched = batched_outputs<T>(ws);
      EXPECT_TRUE(got_batched == ref_batched)
          << "gemm_det_batched: first difference at " << first_difference(got_batched, ref_batched);
      if (std::is_same<T, float>::value) {
        const auto got_exact = exact_outputs(opt, ws);
        EXPECT_TRUE(got_exact == ref_exact)
            << "gemm_det_exact: first difference at " << first_difference(got_exact, ref_exact);
      }
    }
  }
}

TEST(GemmBlockingBits, ProcessBlockingFloat) {
  check_process_blockings<float>();
}
TEST(GemmBlockingBits, ProcessBlockingDouble) {
  check_process_blockings<double>();
}

// The same blockings forced through GemmOptions, the process's blocking left as chosen.
TEST(GemmBlockingBits, OptionsFloat) {
  if (!kHost) GTEST_SKIP() << "the packed host path needs host-accessible memory";
  KernelWorkspace ws;
  for (GemmPath path : packed_paths()) {
    GemmOptions def;
    def.path = path;
    const auto ref = gemm_outputs<float>(def, ws);
    const auto ref_exact = exact_outputs(def, ws);
    for (const auto& [name, b] : sweep()) {
      SCOPED_TRACE(name + ": " + describe(b));
      GemmOptions opt = def;
      opt.mc = b.f32.mc, opt.kc = b.f32.kc, opt.nc = b.f32.nc;
      const auto got = gemm_outputs<float>(opt, ws);
      EXPECT_TRUE(got == ref) << "gemm_det: first difference at " << first_difference(got, ref);
      GemmOptions eopt = def;
      eopt.mc = b.exact_mc, eopt.nc = b.exact_nc, eopt.group = std::min(exact_group_for(b, 33), 256);
      const auto got_exact = exact_outputs(eopt, ws);
      EXPECT_TRUE(got_exact == ref_exact)
          << "gemm_det_exact: first difference at " << first_difference(got_exact, ref_exact);
    }
  }
}

}  // namespace
}  // namespace minipipe
