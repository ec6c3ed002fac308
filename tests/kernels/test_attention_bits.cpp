// Attention kernels against the frozen reference (attention_reference.hpp): out, att and dqkv must
// be bitwise identical in both modes, float and double, over shapes that cover T = 1, T not a
// multiple of any block size, several head sizes and several samples (DESIGN.md §4), and heads
// too large for team scratch, which take the one-thread-per-row kernels.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "attention_reference.hpp"
#include "kernels/attention.hpp"
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

// One shape, one mode: forward of both implementations, then backward of both from the same att.
// amp scales qkv so that large logits (exp underflow to 0 and subnormals) are covered too.
template <class T>
void check_shape(Mode mode, int B, int Tn, int C, int H, double amp, std::uint64_t seed, int nan_key = -1) {
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
  test::AttentionReference<T>::forward(mode, B, Tn, C, H, qkv.cmat(), att_ref.mat(), out_ref.mat());
  fence("test::attention_bits");
  expect_same_bits(out, out_ref, what + " out");
  expect_same_bits(att, att_ref, what + " att");

  Attention<T>::backward_input(mode, B, Tn, C, H, qkv.cmat(), att_ref.cmat(), dout.cmat(), dqkv.mat());
  test::AttentionReference<T>::backward_input(mode, B, Tn, C, H, qkv.cmat(), att_ref.cmat(), dout.cmat(),
                                              dqkv_ref.mat());
  fence("test::attention_bits");
  expect_same_bits(dqkv, dqkv_ref, what + " dqkv");
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
  // Large logits: many exp results underflow or are subnormal.
  for (Mode mode : {Mode::deterministic, Mode::fast}) check_shape<T>(mode, 2, 37, 64, 4, 12.0, seed + 7);
  // A NaN key: the rows of the queries that see it are NaN with the reference's bits, the others
  // are unchanged.
  check_shape<T>(Mode::deterministic, 2, 70, 64, 4, 2.0, seed + 8, 33);
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
// cost low (the work grows with T^2 hs). The row kernels must have run, with the same bits.
template <class T>
void check_row_fallback(Mode mode, int B, int H) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const int Tn = 12;
  const std::size_t limit = static_cast<std::size_t>(Policy::scratch_size_max(1));
  const int hs = static_cast<int>(limit / sizeof(T) / Tn) + 64;  // hs * Tp * sizeof(T) > limit
  RecordKernels rec;
  check_shape<T>(mode, B, Tn, hs * H, H, 2.0, 3000 + H);
  EXPECT_TRUE(launched().count("Attention::forward_rows")) << "the forward row kernel did not run";
  EXPECT_TRUE(launched().count("Attention::backward_rowdot_rows")) << "the backward row kernels did not run";
  EXPECT_FALSE(launched().count("Attention::forward") || launched().count("Attention::backward_input"))
      << "a team-scratch kernel ran for a head that does not fit in scratch";
}

// Two heads of one sample in float (head offsets), two samples of one head in double (sample
// offsets); the two modes differ only in exp, so one of each keeps the test short.
TEST(AttentionBits, RowFallbackFloatMatchesReference) {
  check_row_fallback<float>(Mode::deterministic, 1, 2);
}
TEST(AttentionBits, RowFallbackDoubleMatchesReference) {
  check_row_fallback<double>(Mode::fast, 2, 1);
}

TEST(AttentionBits, FloatMatchesReference) {
  check_all_shapes<float>();
}
TEST(AttentionBits, DoubleMatchesReference) {
  check_all_shapes<double>();
}

}  // namespace
}  // namespace minipipe
