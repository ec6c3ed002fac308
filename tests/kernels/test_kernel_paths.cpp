// The device path of every deterministic kernel (KernelPath::device, run here on the host backend)
// against the host path, bit for bit, at shapes with ragged edges; the device kernels' team scratch
// at GPT-2 shapes within CUDA/HIP's 40 KB; the canonical row order against a reference built here.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/attention_device.hpp"
#include "kernels/attention_order.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/detmath.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_path.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "kernels/row_reduce.hpp"
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

template <class T>
void linear_weight_case(int O, int I, int Tr, int S) {
  const std::string what = tname<T>() + " O" + std::to_string(O) + " I" + std::to_string(I) + " T" +
                           std::to_string(Tr) + " S" + std::to_string(S);
  const int N = Tr * S;
  Tensor<T> x("x", N, I), dy("dy", N, O);
  test::fill_uniform(x, 31);
  test::fill_uniform(dy, 32);
  Tensor<T> w_host("wh", O, I), w_dev("wd", O, I), b_host("bh", O), b_dev("bd", O);
  KernelWorkspace ws;
  both_paths([&](bool dev) {
    GradAccum<T> dW("dW", std::size_t(O) * I, Mode::deterministic), db("db", O, Mode::deterministic);
    dW.zero();
    db.zero();
    Linear<T>::backward_weight(Mode::deterministic, x.cmat(), dy.cmat(), Tr, dW, &db, ws);
    dW.finalize((dev ? w_dev : w_host).d);
    db.finalize((dev ? b_dev : b_host).d);
  });
  EXPECT_SAME_BITS(w_dev, w_host, what + " dW");
  EXPECT_SAME_BITS(b_dev, b_host, what + " db");
}

TEST(KernelPath, LinearForwardInputWeightDeviceEqualsHost) {
  linear_weight_case<float>(1, 1, 1, 1);
  linear_weight_case<float>(33, 70, 5, 3);
  linear_weight_case<float>(65, 17, 9, 2);
  linear_weight_case<float>(129, 9, 8, 5);  // tile edges of the batched kernel, K = a whole k-block
  linear_weight_case<float>(7, 130, 17, 1);
  linear_weight_case<double>(65, 17, 9, 2);
  linear_weight_case<double>(33, 70, 5, 3);
  const int N = 23, I = 45, O = 67;
  Tensor<float> x("x", N, I), W("W", O, I), b("b", O), dy("dy", N, O);
  test::fill_uniform(x, 41);
  test::fill_uniform(W, 42);
  test::fill_uniform(b, 43);
  test::fill_uniform(dy, 44);
  Tensor<float> y_host("yh", N, O), y_dev("yd", N, O), dx_host("dxh", N, I), dx_dev("dxd", N, I);
  KernelWorkspace ws;
  both_paths([&](bool dev) {
    Linear<float>::forward(Mode::deterministic, x.cmat(), W.cmat(), b.cvec(), (dev ? y_dev : y_host).mat(), ws);
    Linear<float>::backward_input(Mode::deterministic, dy.cmat(), W.cmat(), (dev ? dx_dev : dx_host).mat(), ws);
  });
  EXPECT_SAME_BITS(y_dev, y_host, "Linear::forward");
  EXPECT_SAME_BITS(dx_dev, dx_host, "Linear::backward_input");
}

// ---- embedding ---------------------------------------------------------------------------------

// The weight gradients with repeated tokens; the device path splits the vocabulary into 32 token
// ranges (V = 70: ranges of 3, the last one short; V = 5: one token a range) and channels into
// blocks of 32; the host path walks the rows with blocks of 64 channels side by side (C = 150: two
// whole blocks and a short one). Both modes: each element's rows are added in row order on both paths.
TEST(KernelPath, EmbeddingWeightsDeviceEqualsHost) {
  const int cases[][4] = {{3, 7, 70, 33}, {2, 5, 5, 1}, {1, 1, 40, 64}, {2, 9, 37, 150}};  // B, T, V, C
  for (const auto& cs : cases)
    for (Mode mode : {Mode::deterministic, Mode::fast}) {
      const int B = cs[0], Tn = cs[1], V = cs[2], C = cs[3], N = B * Tn;
      std::vector<int> tok(N);
      for (int n = 0; n < N; ++n) tok[n] = (n * 7 + n / 3) % V;
      test::IntTensor tokens(tok);
      Tensor<float> dout("dout", N, C);
      test::fill_uniform(dout, 81 + V);
      Tensor<float> te[2] = {{"teh", V, C}, {"ted", V, C}}, pe[2] = {{"peh", Tn, C}, {"ped", Tn, C}};
      both_paths([&](bool dev) {
        GradAccum<float> dwte("wte", std::size_t(V) * C, mode), dwpe("wpe", std::size_t(Tn) * C, mode);
        dwte.zero();
        dwpe.zero();
        for (int rep = 0; rep < 2; ++rep)  // twice: the second call adds to the first's sums
          Embedding<float>::backward_weight(mode, B, Tn, tokens.all(), dout.cmat(), dwte, dwpe);
        dwte.finalize(te[dev].d);
        dwpe.finalize(pe[dev].d);
      });
      const std::string what = std::string(mode == Mode::fast ? "fast" : "deterministic") + " Embedding V" +
                               std::to_string(V) + " C" + std::to_string(C);
      EXPECT_SAME_BITS(te[1], te[0], what + " dwte");
      EXPECT_SAME_BITS(pe[1], pe[0], what + " dwpe");
    }
}

// ---- LayerNorm, cross-entropy -------------------------------------------------------------------

// The canonical order written out independently: lane l sums c = l, l+32, ... in order, then the
// pairwise tree over lanes (w = 16, 8, 4, 2, 1).
template <class T>
T canonical_sum(const std::vector<T>& v) {
  T p[32] = {};
  for (std::size_t c = 0; c < v.size(); ++c) p[c % 32] = p[c % 32] + v[c];
  for (int w = 16; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) p[l] = p[l] + p[l + w];
  return p[0];
}

template <class T>
void layernorm_case(int N, int C, int R) {
  const std::string what = tname<T>() + " LayerNorm N" + std::to_string(N) + " C" + std::to_string(C);
  Tensor<T> x("x", N, C), w("w", C), b("b", C), dout("dout", N, C);
  test::fill_uniform(x, 51, -3.0, 5.0);
  test::fill_uniform(w, 52);
  test::fill_uniform(b, 53);
  test::fill_uniform(dout, 54);
  Tensor<T> out[2] = {{"oh", N, C}, {"od", N, C}}, mean[2] = {{"mh", N}, {"md", N}}, rstd[2] = {{"rh", N}, {"rd", N}},
            dx[2] = {{"dxh", N, C}, {"dxd", N, C}}, dw[2] = {{"dwh", C}, {"dwd", C}}, db[2] = {{"dbh", C}, {"dbd", C}};
  both_paths([&](bool dev) {
    const int k = dev ? 1 : 0;
    LayerNorm<T>::forward(Mode::deterministic, x.cmat(), w.cvec(), b.cvec(), out[k].mat(), mean[k].vec(),
                          rstd[k].vec());
    LayerNorm<T>::backward_input(Mode::deterministic, x.cmat(), w.cvec(), mean[k].cvec(), rstd[k].cvec(), dout.cmat(),
                                 dx[k].mat());
    GradAccum<T> gw("dw", C, Mode::deterministic), gb("db", C, Mode::deterministic);
    gw.zero();
    gb.zero();
    LayerNorm<T>::backward_weight(Mode::deterministic, x.cmat(), mean[k].cvec(), rstd[k].cvec(), dout.cmat(), R, gw,
                                  gb);
    gw.finalize(dw[k].d);
    gb.finalize(db[k].d);
  });
  EXPECT_SAME_BITS(out[1], out[0], what + " out");
  EXPECT_SAME_BITS(mean[1], mean[0], what + " mean");
  EXPECT_SAME_BITS(rstd[1], rstd[0], what + " rstd");
  EXPECT_SAME_BITS(dx[1], dx[0], what + " dx");
  EXPECT_SAME_BITS(dw[1], dw[0], what + " dw");
  EXPECT_SAME_BITS(db[1], db[0], what + " db");
  // The mean is the canonical sum / C, computed here without the kernels' helper.
  x.pull();
  for (int n = 0; n < N; ++n) {
    std::vector<T> row(C);
    for (int c = 0; c < C; ++c) row[c] = x.h(std::size_t(n) * C + c);
    const T m = canonical_sum(row) / static_cast<T>(C);
    EXPECT_EQ(std::memcmp(&m, &mean[0].h(n), sizeof(T)), 0)
        << what << " row " << n << ": " << m << " vs " << mean[0].h(n);
  }
}

TEST(KernelPath, LayerNormDeviceEqualsHost) {
  // (N, C, rows per sample): the weight gradient's device teams take 32 channels and 8 samples a
  // pass, so C and S = N / R also fall one below, at and one above those; S = 20 makes passes of 8,
  // 8 and 4, where a GPU team's later threads refill the partials that the first 32 still read
  // unless the pass ends with a barrier.
  const int shapes[][3] = {{1, 1, 1},   {3, 5, 1},   {4, 31, 2},  {6, 32, 3}, {5, 33, 5}, {8, 100, 4},
                           {3, 768, 3}, {16, 64, 2}, {18, 65, 2}, {7, 63, 1}, {40, 33, 2}};
  for (const auto& s : shapes) {
    layernorm_case<float>(s[0], s[1], s[2]);
    layernorm_case<double>(s[0], s[1], s[2]);
  }
}

template <class T>
void cross_entropy_case(int N, int V) {
  const std::string what = tname<T>() + " CrossEntropy N" + std::to_string(N) + " V" + std::to_string(V);
  Tensor<T> logits("logits", N, V);
  test::fill_uniform(logits, 61 + V, -8.0, 8.0);
  std::vector<int> tg(N);
  for (int n = 0; n < N; ++n) tg[n] = (n % 3 == 2) ? -1 : (n * 7) % V;
  test::IntTensor targets(tg);
  Tensor<T> loss[2] = {{"lh", N}, {"ld", N}}, dl[2] = {{"gh", N, V}, {"gd", N, V}};
  both_paths([&](bool dev) {
    const int k = dev ? 1 : 0;
    CrossEntropy<T>::forward(Mode::deterministic, logits.cmat(), targets.all(), loss[k].vec());
    CrossEntropy<T>::backward_input(Mode::deterministic, logits.cmat(), targets.all(), T(0.25), dl[k].mat());
  });
  EXPECT_SAME_BITS(loss[1], loss[0], what + " loss");
  EXPECT_SAME_BITS(dl[1], dl[0], what + " dlogits");
  // Independent check of the host path's order: sum of exp(logit - max) in the canonical tree.
  logits.pull();
  for (int n = 0; n < N; ++n) {
    if (tg[n] < 0) continue;
    T mx = logits.h(std::size_t(n) * V);
    for (int v = 1; v < V; ++v) mx = std::max(mx, logits.h(std::size_t(n) * V + v));
    std::vector<T> e(V);
    for (int v = 0; v < V; ++v) e[v] = det::exp(logits.h(std::size_t(n) * V + v) - mx);
    const T ref = det::log(canonical_sum(e)) - (logits.h(std::size_t(n) * V + tg[n]) - mx);
    EXPECT_EQ(std::memcmp(&ref, &loss[0].h(n), sizeof(T)), 0)
        << what << " row " << n << ": " << ref << " vs " << loss[0].h(n);
  }
}

TEST(KernelPath, CrossEntropyDeviceEqualsHost) {
  const int shapes[][2] = {{1, 1}, {4, 3}, {6, 31}, {5, 32}, {7, 33}, {4, 100}, {3, 1027}};
  for (const auto& s : shapes) {
    cross_entropy_case<float>(s[0], s[1]);
    cross_entropy_case<double>(s[0], s[1]);
  }
}

// ---- attention -------------------------------------------------------------------------------

template <class T>
void attention_case(int B, int Tn, int C, int H) {
  const std::string what = tname<T>() + " Attention B" + std::to_string(B) + " T" + std::to_string(Tn) + " C" +
                           std::to_string(C) + " H" + std::to_string(H);
  const int N = B * Tn;
  Tensor<T> qkv("qkv", N, 3 * C), dout("dout", N, C);
  test::fill_uniform(qkv, 71 + Tn, -2.0, 2.0);
  test::fill_uniform(dout, 72);
  Tensor<T> att[2] = {{"ah", B * H * Tn, Tn}, {"ad", B * H * Tn, Tn}}, out[2] = {{"oh", N, C}, {"od", N, C}},
            dqkv[2] = {{"gh", N, 3 * C}, {"gd", N, 3 * C}};
  for (int k = 0; k < 2; ++k) {  // garbage everywhere: each path must overwrite all it returns
    test::fill_uniform(att[k], 73 + k, -9.0, 9.0);
    test::fill_uniform(out[k], 75 + k, -9.0, 9.0);
    test::fill_uniform(dqkv[k], 77 + k, -9.0, 9.0);
  }
  both_paths([&](bool dev) {
    const int k = dev ? 1 : 0;
    Attention<T>::forward(Mode::deterministic, B, Tn, C, H, qkv.cmat(), att[k].mat(), out[k].mat());
    // each path's backward reads its own att, whose entries above the diagonal differ (garbage on
    // the device path, which does not write them): the backward must not read them
    Attention<T>::backward_input(Mode::deterministic, B, Tn, C, H, qkv.cmat(), att[k].cmat(), dout.cmat(),
                                 dqkv[k].mat());
  });
  for (Tensor<T>& a : att) {  // the probabilities: the lower triangle with the diagonal
    a.pull();
    for (std::size_t r = 0; r < std::size_t(B) * H * Tn; ++r)
      for (int t2 = static_cast<int>(r % Tn) + 1; t2 < Tn; ++t2) a.h(r * Tn + t2) = T(0);
    a.push();
  }
  EXPECT_SAME_BITS(att[1], att[0], what + " att");
  EXPECT_SAME_BITS(out[1], out[0], what + " out");
  EXPECT_SAME_BITS(dqkv[1], dqkv[0], what + " dqkv");
  // Both against the canonical order's plain loops (attention_order.hpp), not only each other.
  Tensor<T> att_o("ao", B * H * Tn, Tn), out_o("oo", N, C), dqkv_o("go", N, 3 * C);
  attention_order::forward<T>("test::order::", B, Tn, C, H, qkv.cmat(), att_o.mat(), out_o.mat());
  attention_order::backward_input<T>("test::order::", B, Tn, C, H, qkv.cmat(), att[0].cmat(), dout.cmat(),
                                     dqkv_o.mat());
  fence("test::attention_order");
  EXPECT_SAME_BITS(att[1], att_o, what + " att (device vs order)");
  EXPECT_SAME_BITS(out[1], out_o, what + " out (device vs order)");
  EXPECT_SAME_BITS(dqkv[1], dqkv_o, what + " dqkv (device vs order)");
}

TEST(KernelPath, AttentionDeviceEqualsHost) {
  const int shapes[][4] = {{1, 1, 4, 1},   {2, 5, 12, 3},   {1, 33, 32, 2},
                           {2, 70, 64, 2}, {1, 129, 16, 1}, {1, 40, 130, 1}};
  for (const auto& s : shapes) {
    attention_case<float>(s[0], s[1], s[2], s[3]);
    attention_case<double>(s[0], s[1], s[2], s[3]);
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
