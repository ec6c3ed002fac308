// Attention kernels against their canonical order (kernels/attention_order.hpp): the optimised
// host path's out, att and dqkv must be bitwise those of the order's plain loops in both modes,
// float and double, over shapes that cover T = 1, T not a multiple of any block size, several head
// sizes and several samples (docs/design.md §4). The order itself is checked against attention computed
// in long double (another way: softmax and its gradient written out directly), and so are heads too
// large for team scratch, which run the order's own row kernels.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/attention_order.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using test::Tensor;

// Index of the first element whose bits differ, or -1.
template <class T>
long first_bit_difference(Tensor<T>& a, Tensor<T>& b) {
  a.pull();
  b.pull();
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a.h(i), &b.h(i), sizeof(T)) != 0) return static_cast<long>(i);
  return -1;
}

template <class T>
void expect_same_bits(Tensor<T>& got, Tensor<T>& ref, const std::string& what) {
  const long i = first_bit_difference(got, ref);
  EXPECT_EQ(i, -1) << what << ": first differing element " << i << " ("
                   << (i >= 0 ? static_cast<double>(got.h(i)) : 0.0) << " vs "
                   << (i >= 0 ? static_cast<double>(ref.h(i)) : 0.0) << ")";
}

// Attention in long double straight from its definition: att = softmax(q k^T scale) over the keys
// t2 <= t, out = att v, and with datt = dout v^T, dpre = att (datt - sum_t2 att datt),
// dq = scale dpre k, dk = scale dpre^T q, dv = att^T dout. Returns att, out, dqkv (host, flat).
struct LongDoubleAttention {
  std::vector<long double> att, out, dqkv;
};
template <class T>
LongDoubleAttention attention_long_double(Tensor<T>& qkv_t, Tensor<T>& dout_t, int B, int Tn, int C, int H) {
  qkv_t.pull();
  dout_t.pull();
  const int hs = C / H;
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(hs));
  auto q = [&](int n, int i) { return static_cast<long double>(qkv_t.h(std::size_t(n) * 3 * C + i)); };
  auto dout = [&](int n, int i) { return static_cast<long double>(dout_t.h(std::size_t(n) * C + i)); };
  LongDoubleAttention r;
  r.att.assign(std::size_t(B) * H * Tn * Tn, 0.0L);
  r.out.assign(std::size_t(B) * Tn * C, 0.0L);
  r.dqkv.assign(std::size_t(B) * Tn * 3 * C, 0.0L);
  std::vector<long double> dpre(std::size_t(Tn) * Tn);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
      long double* a = &r.att[std::size_t(b * H + h) * Tn * Tn];
      for (int t = 0; t < Tn; ++t) {
        long double mx = -INFINITY, sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          long double s = 0;
          for (int i = 0; i < hs; ++i) s += q(b * Tn + t, qo + i) * q(b * Tn + t2, ko + i);
          a[t * Tn + t2] = s * scale;
          mx = std::max(mx, a[t * Tn + t2]);
        }
        for (int t2 = 0; t2 <= t; ++t2) sum += (a[t * Tn + t2] = std::exp(a[t * Tn + t2] - mx));
        for (int t2 = 0; t2 <= t; ++t2) a[t * Tn + t2] /= sum;
        for (int i = 0; i < hs; ++i) {
          long double o = 0;
          for (int t2 = 0; t2 <= t; ++t2) o += a[t * Tn + t2] * q(b * Tn + t2, vo + i);
          r.out[std::size_t(b * Tn + t) * C + qo + i] = o;
        }
        long double rowdot = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          long double d = 0;
          for (int i = 0; i < hs; ++i) d += dout(b * Tn + t, qo + i) * q(b * Tn + t2, vo + i);
          dpre[t * Tn + t2] = d;
          rowdot += a[t * Tn + t2] * d;
        }
        for (int t2 = 0; t2 <= t; ++t2) dpre[t * Tn + t2] = a[t * Tn + t2] * (dpre[t * Tn + t2] - rowdot) * scale;
      }
      for (int t = 0; t < Tn; ++t)
        for (int t2 = 0; t2 <= t; ++t2)
          for (int i = 0; i < hs; ++i) {
            const long double p = dpre[t * Tn + t2];
            r.dqkv[std::size_t(b * Tn + t) * 3 * C + qo + i] += p * q(b * Tn + t2, ko + i);
            r.dqkv[std::size_t(b * Tn + t2) * 3 * C + ko + i] += p * q(b * Tn + t, qo + i);
            r.dqkv[std::size_t(b * Tn + t2) * 3 * C + vo + i] += a[t * Tn + t2] * dout(b * Tn + t, qo + i);
          }
    }
  return r;
}

// got within tol * max|ref| of ref everywhere (tol a few rounding errors of a chain of `depth`).
template <class T>
void expect_close(Tensor<T>& got, const std::vector<long double>& ref, int depth, const std::string& what) {
  got.pull();
  ASSERT_EQ(got.size(), ref.size()) << what;
  long double scale = 0, worst = 0;
  std::size_t at = 0;
  for (long double v : ref) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const long double e = std::fabs(static_cast<long double>(got.h(i)) - ref[i]);
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  const long double tol =
      64.0L * std::numeric_limits<T>::epsilon() * std::sqrt(static_cast<long double>(depth)) * std::max(scale, 1.0L);
  EXPECT_LE(worst, tol) << what << ": element " << at << " is " << static_cast<double>(got.h(at)) << ", expected "
                        << static_cast<double>(ref[at]);
}

// One shape, one mode: forward of the kernels and of the canonical order, then backward of both
// from the same att; with `exact`, the order's results against attention in long double too.
// amp scales qkv so that large logits (exp underflow to 0 and subnormals) are covered too.
template <class T>
void check_shape(Mode mode, int B, int Tn, int C, int H, double amp, std::uint64_t seed, int nan_key = -1,
                 bool exact = false) {
  const int N = B * Tn;
  const std::string what = std::string(sizeof(T) == 4 ? "float" : "double") + " " + to_string(mode) + " B" +
                           std::to_string(B) + " T" + std::to_string(Tn) + " C" + std::to_string(C) + " H" +
                           std::to_string(H) + " amp " + std::to_string(amp);
  Tensor<T> qkv("qkv", N, 3 * C), dout("dout", N, C);
  test::fill_uniform(qkv, seed, -amp, amp);
  test::fill_uniform(dout, seed + 1);
  if (nan_key >= 0) {  // one channel of one key of head 0, sample 0: the scores of the queries t >= it
    qkv.pull();
    qkv.h(static_cast<std::size_t>(nan_key) * 3 * C + C + 1) = std::numeric_limits<T>::quiet_NaN();
    qkv.push();
  }
  Tensor<T> att("att", B * H * Tn, Tn), att_ref("att_ref", B * H * Tn, Tn), out("out", N, C), out_ref("out_ref", N, C),
      dqkv("dqkv", N, 3 * C), dqkv_ref("dqkv_ref", N, 3 * C);
  // Garbage in every output: the kernels must overwrite all of it (masked att entries included).
  test::fill_uniform(att, seed + 2, -9.0, 9.0);
  test::fill_uniform(out, seed + 3, -9.0, 9.0);
  test::fill_uniform(dqkv, seed + 4, -9.0, 9.0);
  test::fill_uniform(dqkv_ref, seed + 5, -9.0, 9.0);

  Attention<T>::forward(mode, B, Tn, C, H, qkv.cmat(), att.mat(), out.mat());
  attention_order::forward<T>("test::order::", B, Tn, C, H, qkv.cmat(), att_ref.mat(), out_ref.mat());
  fence("test::attention_bits");
  if (mode == Mode::fast) {  // fast mode's own exp and 1 / sum on the host: close, not the order's bits
    const LongDoubleAttention ld = attention_long_double(qkv, dout, B, Tn, C, H);
    expect_close(att, ld.att, std::max(C / H, Tn), what + " att (vs long double)");
    expect_close(out, ld.out, std::max(C / H, Tn), what + " out (vs long double)");
  } else {
    expect_same_bits(out, out_ref, what + " out");
    expect_same_bits(att, att_ref, what + " att");
  }

  Attention<T>::backward_input(mode, B, Tn, C, H, qkv.cmat(), att_ref.cmat(), dout.cmat(), dqkv.mat());
  attention_order::backward_input<T>("test::order::", B, Tn, C, H, qkv.cmat(), att_ref.cmat(), dout.cmat(),
                                     dqkv_ref.mat());
  fence("test::attention_bits");
  expect_same_bits(dqkv, dqkv_ref, what + " dqkv");
  if (!exact) return;
  const LongDoubleAttention ld = attention_long_double(qkv, dout, B, Tn, C, H);
  const int depth = std::max(C / H, Tn);
  expect_close(att_ref, ld.att, depth, what + " att (order vs long double)");
  expect_close(out_ref, ld.out, depth, what + " out (order vs long double)");
  expect_close(dqkv_ref, ld.dqkv, depth, what + " dqkv (order vs long double)");
}

// The row kernels of a head too large for team scratch (the canonical order's own) against
// attention in long double; the production call must have taken them.
template <class T>
void check_rows_close(Mode mode, int B, int Tn, int C, int H, std::uint64_t seed) {
  const int N = B * Tn;
  const std::string what = std::string(sizeof(T) == 4 ? "float" : "double") + " row kernels B" + std::to_string(B) +
                           " T" + std::to_string(Tn) + " C" + std::to_string(C) + " H" + std::to_string(H);
  Tensor<T> qkv("qkv", N, 3 * C), dout("dout", N, C), att("att", B * H * Tn, Tn), out("out", N, C),
      dqkv("dqkv", N, 3 * C);
  test::fill_uniform(qkv, seed, -2.0, 2.0);
  test::fill_uniform(dout, seed + 1);
  test::fill_uniform(att, seed + 2, -9.0, 9.0);
  test::fill_uniform(dqkv, seed + 3, -9.0, 9.0);
  Attention<T>::forward(mode, B, Tn, C, H, qkv.cmat(), att.mat(), out.mat());
  Attention<T>::backward_input(mode, B, Tn, C, H, qkv.cmat(), att.cmat(), dout.cmat(), dqkv.mat());
  fence("test::attention_rows");
  const LongDoubleAttention ld = attention_long_double(qkv, dout, B, Tn, C, H);
  const int depth = C / H;
  expect_close(att, ld.att, depth, what + " att");
  expect_close(out, ld.out, depth, what + " out");
  expect_close(dqkv, ld.dqkv, depth, what + " dqkv");
}

template <class T>
void check_all_shapes() {
  struct Heads {
    int C, H;
  };
  // Head sizes 4, 16, 8, 24 and 40: the host path stages K and V through 16 x 16 register transposes
  // where a head has 16 channels or more, and the channels past the last whole 16 one by one; 40
  // takes the widest channel tiles (32 floats with AVX-512) and a quarter-width one.
  const Heads heads[] = {{8, 2}, {64, 4}, {96, 12}, {48, 2}, {80, 2}};
  std::uint64_t seed = sizeof(T) == 4 ? 1000 : 2000;
  for (Mode mode : {Mode::deterministic, Mode::fast})
    for (int B : {1, 3})
      for (int Tn : {1, 5, 64, 130})
        for (const Heads& hd : heads) {
          check_shape<T>(mode, B, Tn, hd.C, hd.H, 2.0, seed);
          seed += 10;
        }
  // T at and around the 16- and 32-lane edges of the host SIMD tiles and of the softmax lanes
  // (a row of 16 keys is one 512-bit float vector, 32 one score tile), head sizes 8, 32 and 64.
  const Heads simd_heads[] = {{16, 2}, {64, 2}, {128, 2}};
  for (Mode mode : {Mode::deterministic, Mode::fast})
    for (int Tn : {1, 15, 16, 17, 31, 33})
      for (const Heads& hd : simd_heads) {
        check_shape<T>(mode, 2, Tn, hd.C, hd.H, 2.0, seed);
        seed += 10;
      }
  // A query block's softmax rows formed in att itself (more keys than the block buffer holds).
  for (Mode mode : {Mode::deterministic, Mode::fast}) check_shape<T>(mode, 1, 520, 16, 2, 2.0, seed + 6);
  // Large logits: many exp results underflow or are subnormal.
  for (Mode mode : {Mode::deterministic, Mode::fast}) check_shape<T>(mode, 2, 37, 64, 4, 12.0, seed + 7);
  // A NaN key: the rows of the queries that see it are NaN with the order's bits, the others
  // are unchanged.
  check_shape<T>(Mode::deterministic, 2, 70, 64, 4, 2.0, seed + 8, 33);
  // The order itself against long double, on a few shapes.
  for (Mode mode : {Mode::deterministic, Mode::fast}) {
    check_shape<T>(mode, 2, 37, 64, 4, 2.0, seed + 9, -1, true);
    check_shape<T>(mode, 1, 130, 48, 2, 2.0, seed + 10, -1, true);
  }
}

// Kernel names launched while a RecordKernels is alive (Kokkos Tools begin_parallel_for hook).
std::set<std::string>& launched() {
  static std::set<std::string> names;
  return names;
}
struct RecordKernels {
  RecordKernels() {
    launched().clear();
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(
        [](const char* name, std::uint32_t, std::uint64_t* id) {
          launched().insert(name);
          *id = 0;
        });
  }
  ~RecordKernels() { Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr); }
};

// A head whose K^T (forward) and V^T + dpre (backward) exceed the largest team scratch of the
// backend: hs * T elements above scratch_size_max(1) (20 MiB on Serial/OpenMP, less on GPUs), as
// long sequences (T around 2000 and up) reach in practice. Few rows and very wide heads keep the
// cost low (the work grows with T^2 hs). The row kernels (the canonical order's own) must have run,
// and agree with attention in long double.
template <class T>
void check_row_fallback(Mode mode, int B, int H) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const int Tn = 12;
  const std::size_t limit = static_cast<std::size_t>(Policy::scratch_size_max(1));
  const int hs = static_cast<int>(limit / sizeof(T) / Tn) + 64;  // hs * Tp * sizeof(T) > limit
  RecordKernels rec;
  check_rows_close<T>(mode, B, Tn, hs * H, H, 3000 + H);
  EXPECT_TRUE(launched().count("Attention::forward_rows")) << "the forward row kernel did not run";
  EXPECT_TRUE(launched().count("Attention::backward_rowdot_rows")) << "the backward row kernels did not run";
  EXPECT_FALSE(launched().count("Attention::forward") || launched().count("Attention::backward_input"))
      << "a team-scratch kernel ran for a head that does not fit in scratch";
}

// Two heads of one sample in float (head offsets), two samples of one head in double (sample
// offsets); the two modes differ only in exp, so one of each keeps the test short.
TEST(AttentionBits, RowFallbackFloatAgreesWithLongDouble) {
  check_row_fallback<float>(Mode::deterministic, 1, 2);
}
TEST(AttentionBits, RowFallbackDoubleAgreesWithLongDouble) {
  check_row_fallback<double>(Mode::fast, 2, 1);
}

TEST(AttentionBits, FloatMatchesCanonicalOrder) {
  check_all_shapes<float>();
}
TEST(AttentionBits, DoubleMatchesCanonicalOrder) {
  check_all_shapes<double>();
}

}  // namespace
}  // namespace minipipe
