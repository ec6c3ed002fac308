// The GEMM's device path (KernelPath::device, run here on the host backend) against the host path,
// bit for bit, at shapes with ragged edges, in teams and batched; the device kernels' team scratch
// at GPT-2 shapes within CUDA/HIP's 40 KB. The block's kernels are rows of kernel_cases.cpp, held
// to the host path by KernelPaths (test_kernel_properties.cpp).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention_device.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_path.hpp"
#include "kernels/team.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using test::PathScope;
using test::Tensor;

// Index of the first element whose bits differ (or the sizes differ), else -1.
template <class T>
long first_diff(Tensor<T>& a, Tensor<T>& b) {
  a.pull();
  b.pull();
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a.h(i), &b.h(i), sizeof(T)) != 0) return static_cast<long>(i);
  return -1;
}

#define EXPECT_SAME_BITS(a, b, what)                                                \
  do {                                                                              \
    const long i_ = first_diff(a, b);                                               \
    EXPECT_EQ(i_, -1) << (what) << ": first differing element " << i_ << " ("       \
                      << (i_ >= 0 ? static_cast<double>((a).h(i_)) : 0.0) << " vs " \
                      << (i_ >= 0 ? static_cast<double>((b).h(i_)) : 0.0) << ")";   \
  } while (0)

template <class T>
std::string tname() {
  return sizeof(T) == 4 ? "float" : "double";
}

// Runs f on the host path into `host` and on the device path into `dev`.
template <class F>
void both_paths(F&& f) {
  {
    PathScope p(KernelPath::host);
    f(false);
  }
  {
    PathScope p(KernelPath::device);
    f(true);
  }
}

TEST(KernelPath, ParseAndDefault) {
  EXPECT_EQ(parse_kernel_path("auto", "k"), KernelPath::automatic);
  EXPECT_EQ(parse_kernel_path("host", "k"), KernelPath::host);
  EXPECT_EQ(parse_kernel_path("device", "k"), KernelPath::device);
  try {
    parse_kernel_path("gpu", "train.kernel_path");
    FAIL() << "accepted 'gpu'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("train.kernel_path = 'gpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, host, device"), std::string::npos) << e.what();
  }
  PathScope p(KernelPath::device);
  EXPECT_TRUE(use_device_path());
}

// ---- GEMM ------------------------------------------------------------------------------------

template <class T>
void gemm_case(int M, int N, int K, bool ta, bool tb, int epi) {
  const std::string what = tname<T>() + " M" + std::to_string(M) + " N" + std::to_string(N) + " K" + std::to_string(K) +
                           (ta ? " At" : "") + (tb ? " Bt" : "") + " epi" + std::to_string(epi);
  Tensor<T> A("A", M, K), B("B", K, N), bias("bias", N), c_host("ch", M, N), c_dev("cd", M, N);
  test::fill_uniform(A, 11 + M);
  test::fill_uniform(B, 12 + N);
  test::fill_uniform(bias, 13);
  test::fill_uniform(c_host, 14);
  Kokkos::deep_copy(c_dev.d, c_host.d);
  // A read transposed: the data is (K, M) row-major; B likewise (N, K).
  const StridedMat<T> a = ta ? transposed(A.d.data(), M) : row_major(A.d.data(), K);
  const StridedMat<T> b = tb ? transposed(B.d.data(), K) : row_major(B.d.data(), N);
  KernelWorkspace ws;
  both_paths([&](bool dev) {
    Tensor<T>& c = dev ? c_dev : c_host;
    gemm_det<T>(ws, M, N, K, a, b, c.d.data(), N, epi == 1 ? bias.d.data() : nullptr,
                epi == 2   ? GemmOut::accumulate
                : epi == 3 ? GemmOut::chain_on_c
                           : GemmOut::overwrite);
  });
  EXPECT_SAME_BITS(c_dev, c_host, what);
}

// The device kernel's tiles: a thread's 4 x 4 outputs, k-blocks of 8 in two scratch buffers, 64 x 64
// outputs a 256-thread GPU team (float's tile was 8 x 8, 128 x 128, before the register budgets;
// 127-130 keep those edges). The shapes put M, N and K one below, at and one above the edges (and an
// odd number of k-blocks, so both buffers serve).
TEST(KernelPath, GemmDeviceEqualsHost) {
  const int shapes[][3] = {{1, 1, 1},    {1, 1, 0},     {3, 5, 1},     {7, 5, 3},     {1, 70, 33},
                           {65, 63, 17}, {130, 97, 40}, {8, 8, 8},     {9, 7, 9},     {4, 5, 7},
                           {15, 17, 24}, {16, 16, 16},  {127, 129, 1}, {129, 128, 8}, {64, 65, 23}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (int epi = 0; epi < 4; ++epi) {  // plain, bias, accumulate, chain_on_c
        gemm_case<float>(s[0], s[1], s[2], t & 1, t & 2, epi);
        gemm_case<double>(s[0], s[1], s[2], t & 1, t & 2, epi);
      }
}

// Multi-thread teams, whose thread grid and strided ownership a one-thread Serial team never
// exercises: on a host backend with several threads (OpenMP) the device kernel runs teams of 2, 4,
// ... threads (GemmOptions::team) and must give the host path's bits, row sums included. Under the
// simulated GPU executor (MINIPIPE_TEST_TEAM_SIM, kernels/team_sim.hpp) every team size up to 256.
TEST(KernelPath, GemmDeviceTeamsEqualHost) {
  int max_team = std::min(256, static_cast<int>(ExecSpace::concurrency()));
#ifdef MINIPIPE_TEAM_SIM_ON
  if (team::sim::active()) max_team = 256;
#endif
  if (max_team < 2) GTEST_SKIP() << ExecSpace::name() << " runs one thread per team";
  const int shapes[][3] = {{1, 1, 1}, {9, 7, 9}, {33, 65, 17}, {130, 97, 40}};
  for (int team = 2; team <= max_team; team *= 2)
    for (const auto& s : shapes)
      for (int t = 0; t < 4; ++t) {
        const int M = s[0], N = s[1], K = s[2];
        const bool ta = t & 1, tb = t & 2;
        Tensor<float> A("A", M, K), B("B", K, N), c[2] = {{"ch", M, N}, {"cd", M, N}}, r[2] = {{"rh", M}, {"rd", M}};
        test::fill_uniform(A, 15 + M);
        test::fill_uniform(B, 16 + N);
        const StridedMat<float> a = ta ? transposed(A.d.data(), M) : row_major(A.d.data(), K);
        const StridedMat<float> b = tb ? transposed(B.d.data(), K) : row_major(B.d.data(), N);
        KernelWorkspace ws;
        both_paths([&](bool dev) {
          GemmOptions opt;
          opt.team = dev ? team : 0;
          gemm_det_row_sums<float>(ws, opt, M, N, K, a, b, c[dev].d.data(), N, GemmOut::accumulate, r[dev].d.data());
        });
        const std::string what = "team " + std::to_string(team) + " M" + std::to_string(M) + " N" + std::to_string(N) +
                                 " K" + std::to_string(K) + (ta ? " At" : "") + (tb ? " Bt" : "");
        EXPECT_SAME_BITS(c[1], c[0], what);
        EXPECT_SAME_BITS(r[1], r[0], what + " row sums");
      }
}

// One launch over the samples, with each sample's row sums stored beside it (the bias partials of
// the device backward-weight), against gemm_det and an independent loop per sample.
TEST(KernelPath, GemmBatchedEqualsPerSample) {
  const int S = 3, M = 37, N = 70, K = 19;
  Tensor<float> A("A", S * K, M), B("B", S * K, N), c_host("ch", S * M, N), c_dev("cd", S * M, N);
  Tensor<float> r_host("rh", S * M), r_dev("rd", S * M);
  test::fill_uniform(A, 21);
  test::fill_uniform(B, 22);
  test::fill_uniform(r_host, 23);  // stored, not added to
  test::fill_uniform(r_dev, 24);
  KernelWorkspace ws;
  both_paths([&](bool dev) {
    gemm_det_batched<float>(ws, S, M, N, K, transposed(A.d.data(), M), std::ptrdiff_t(K) * M, row_major(B.d.data(), N),
                            std::ptrdiff_t(K) * N, (dev ? c_dev : c_host).d.data(), std::ptrdiff_t(M) * N, N,
                            GemmOut::overwrite, (dev ? r_dev : r_host).d.data(), M);
  });
  EXPECT_SAME_BITS(c_dev, c_host, "batched");
  EXPECT_SAME_BITS(r_dev, r_host, "batched row sums");
  A.pull();
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      float want = 0;  // A_s(m,k) = A(s*K + k, m): the chain in k order
      for (int k = 0; k < K; ++k) want = want + A.h(std::size_t(s * K + k) * M + m);
      EXPECT_EQ(std::memcmp(&want, &r_dev.h(std::size_t(s) * M + m), sizeof(float)), 0)
          << "sample " << s << " row " << m;
    }
}

// ---- team scratch of the device kernels --------------------------------------------------------

// CUDA and HIP give a block 48 KB / 64 KB of shared memory by default; the design bound is 40 KB
// so that two teams can share a multiprocessor. GPT-2 124M: C = 768, H = 12, head size 64,
// T = 1024; the device kernels' scratch does not depend on T or C.
TEST(KernelPath, DeviceScratchFitsLevel0AtGpt2Shapes) {
  constexpr std::size_t kLimit = 40 * 1024;
  const int hs = 768 / 12;
  EXPECT_LE(attention_device::forward_scratch_bytes<float>(hs), kLimit);
  EXPECT_LE(attention_device::backward_scratch_bytes<float>(hs), kLimit);
  EXPECT_LE(attention_device::forward_scratch_bytes<double>(hs), kLimit);
  EXPECT_LE(attention_device::backward_scratch_bytes<double>(hs), kLimit);
  EXPECT_LE(gemm_det_device_scratch_bytes<float>(), kLimit);
  EXPECT_LE(gemm_det_device_scratch_bytes<double>(), kLimit);
  std::printf("device scratch (hs 64, float): attention forward %zu B, backward %zu B, GEMM %zu B\n",
              attention_device::forward_scratch_bytes<float>(hs), attention_device::backward_scratch_bytes<float>(hs),
              gemm_det_device_scratch_bytes<float>());
}

// Occupancy of the attention kernels on gfx90a, whose CU has 64 KB of LDS for all its teams: at
// GPT-2's head size two teams of attention_device::kGpuTeam threads (4 waves each, 2 a SIMD: 25%
// occupancy) must fit, each with its tiles and the 8 x (team + 2) bytes Kokkos adds to a team kernel.
// The 32 x 32 float tiles of the forward took 33 KB: one team a CU (scripts/device_budgets.sh).
TEST(KernelPath, AttentionScratchFitsTwoTeamsPerGfx90aCu) {
  constexpr std::size_t kHalfCu = 32 * 1024;
  const std::size_t kokkos = 8 * (attention_device::kGpuTeam + 2);
  const int hs = 768 / 12;
  EXPECT_LE(attention_device::forward_scratch_bytes<float>(hs) + kokkos, kHalfCu);
  EXPECT_LE(attention_device::backward_scratch_bytes<float>(hs) + kokkos, kHalfCu);
  EXPECT_LE(attention_device::forward_scratch_bytes<double>(hs) + kokkos, kHalfCu);
  EXPECT_LE(attention_device::backward_scratch_bytes<double>(hs) + kokkos, kHalfCu);
}

}  // namespace
}  // namespace minipipe
