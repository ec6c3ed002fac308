// gemm_det against a naive sequential-FMA reference, bit for bit: odd shapes, transposed
// strides, K = 1, several k-blocks, bias, accumulate and chain-on-C epilogues, every path and blocking.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "kernels/gemm.hpp"

namespace minipipe {
namespace {

using test::random_values;
using test::to_device;
using test::to_host;

enum class Epilogue { plain, bias, accumulate, chain_on_c };
constexpr Epilogue kEpilogues[] = {Epilogue::plain, Epilogue::bias, Epilogue::accumulate, Epilogue::chain_on_c};

const char* name(Epilogue e) {
  return e == Epilogue::plain        ? "plain"
         : e == Epilogue::bias       ? "bias"
         : e == Epilogue::accumulate ? "accumulate"
                                     : "chain_on_c";
}

GemmOut gemm_out(Epilogue e) {
  return e == Epilogue::accumulate   ? GemmOut::accumulate
         : e == Epilogue::chain_on_c ? GemmOut::chain_on_c
                                     : GemmOut::overwrite;
}

// One problem with operands stored in padded buffers (leading dims larger than needed).
template <class T>
struct Problem {
  int M, N, K;
  bool a_transposed, b_transposed;
  std::ptrdiff_t lda, ldb, ldc;
  std::vector<T> a, b, bias, c0;  // c0: initial C including the padding columns

  Problem(int m, int n, int k, bool at, bool bt, std::uint64_t seed)
      : M(m), N(n), K(k), a_transposed(at), b_transposed(bt) {
    lda = at ? M + 2 : K + 3;  // A stored (K, lda) when transposed, else (M, lda)
    ldb = bt ? K + 5 : N + 1;  // B stored (N, ldb) when transposed, else (K, ldb)
    ldc = N + 3;
    a = random_values<T>(static_cast<std::size_t>(at ? K : M) * lda + 1, seed);
    b = random_values<T>(static_cast<std::size_t>(bt ? N : K) * ldb + 1, seed + 1);
    bias = random_values<T>(static_cast<std::size_t>(N), seed + 2);
    c0 = random_values<T>(static_cast<std::size_t>(M) * ldc, seed + 3);
  }
  T A(int m, int k) const { return a_transposed ? a[k * lda + m] : a[m * lda + k]; }
  T B(int k, int n) const { return b_transposed ? b[n * ldb + k] : b[k * ldb + n]; }
  StridedMat<T> A_of(const T* p) const { return a_transposed ? transposed(p, lda) : row_major(p, lda); }
  StridedMat<T> B_of(const T* p) const { return b_transposed ? transposed(p, ldb) : row_major(p, ldb); }

  // The contract written out: acc = fma(A(m,k), B(k,n), acc) for k = 0..K-1 from 0 (chain_on_c:
  // from C), then one add. Padding columns of C keep their initial values.
  std::vector<T> reference(Epilogue epi) const {
    std::vector<T> c = c0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        T& out = c[m * ldc + n];
        T acc = epi == Epilogue::chain_on_c ? out : T(0);
        for (int k = 0; k < K; ++k) acc = std::fma(A(m, k), B(k, n), acc);
        out = epi == Epilogue::accumulate ? out + acc : epi == Epilogue::bias ? acc + bias[n] : acc;
      }
    return c;
  }

  std::vector<T> run(const GemmOptions& opt, Epilogue epi) const {
    auto da = to_device(a), db = to_device(b), dbias = to_device(bias), dc = to_device(c0);
    KernelWorkspace ws;
    gemm_det<T>(ws, opt, M, N, K, A_of(da.data()), B_of(db.data()), dc.data(), ldc,
                epi == Epilogue::bias ? dbias.data() : nullptr, gemm_out(epi));
    return to_host(dc);
  }
};

template <class T>
bool bitwise_equal(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

template <class T>
std::size_t first_difference(const std::vector<T>& x, const std::vector<T>& y) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0) return i;
  return x.size();
}

constexpr bool kMemHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

// Every implementation and blocking that must give the reference bits. The small blockings
// force several k-blocks, several column blocks, several row chunks and many edge tiles.
std::vector<std::pair<std::string, GemmOptions>> configurations() {
  std::vector<std::pair<std::string, GemmOptions>> cfg;
  cfg.push_back({"automatic", GemmOptions{}});
  cfg.push_back({"generic", GemmOptions{GemmPath::generic, 0, 0, 0}});
  if (kMemHostAccessible) {
    cfg.push_back({"scalar/default", GemmOptions{GemmPath::packed_scalar, 0, 0, 0}});
    cfg.push_back({"scalar/mc6,kc7,nc32", GemmOptions{GemmPath::packed_scalar, 6, 7, 32}});
    if (gemm_det_has_simd()) {
      cfg.push_back({"simd/default", GemmOptions{GemmPath::packed_simd, 0, 0, 0}});
      cfg.push_back({"simd/mc6,kc7,nc32", GemmOptions{GemmPath::packed_simd, 6, 7, 32}});
      cfg.push_back({"simd/mc18,kc64,nc48", GemmOptions{GemmPath::packed_simd, 18, 64, 48}});
    }
  }
  return cfg;
}

template <class T>
class GemmDet : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmDet, Scalars);

TYPED_TEST(GemmDet, MatchesSequentialFmaReferenceBitwise) {
  using T = TypeParam;
  struct Shape {
    int M, N, K;
  };
  // Not multiples of the 6 x 16 (6 x 8) tile; K = 1; K past the default k-block of 256;
  // M past a row chunk of the mc = 6 blocking (6 * 24 = 144 rows).
  const std::vector<Shape> shapes = {{1, 1, 1},    {7, 5, 3},     {13, 17, 1},   {6, 16, 8},
                                     {37, 45, 29}, {61, 33, 300}, {150, 37, 20}, {12, 70, 513}};
  const auto cfg = configurations();
  std::uint64_t seed = 1;
  for (const Shape& s : shapes)
    for (int layout = 0; layout < 4; ++layout) {
      const Problem<T> p(s.M, s.N, s.K, layout & 1, layout & 2, seed += 10);
      for (Epilogue epi : kEpilogues) {
        const std::vector<T> ref = p.reference(epi);
        for (const auto& [cfg_name, opt] : cfg) {
          const std::vector<T> got = p.run(opt, epi);
          const std::size_t i = first_difference(got, ref);
          ASSERT_EQ(i, ref.size()) << "M=" << s.M << " N=" << s.N << " K=" << s.K << " A^T=" << p.a_transposed
                                   << " B^T=" << p.b_transposed << " epilogue=" << name(epi) << " path=" << cfg_name
                                   << ": first differing element " << i << " (row " << i / p.ldc << ", col "
                                   << i % p.ldc << ") got " << got[i] << " expected " << ref[i];
        }
      }
    }
}

// A model-sized shape (several k-blocks, full tiles) in the default configuration against the
// generic one-thread-per-element kernel, which is a different code path with the same contract.
TYPED_TEST(GemmDet, ModelShapePackedEqualsGenericBitwise) {
  using T = TypeParam;
  const Problem<T> p(96, 2304, 768, false, true, 77);  // x (96,768) W^T, W (2304,768)
  const auto packed = p.run(GemmOptions{}, Epilogue::bias);
  const auto generic = p.run(GemmOptions{GemmPath::generic, 0, 0, 0}, Epilogue::bias);
  EXPECT_EQ(first_difference(packed, generic), packed.size());
}

// K = 0: acc is zero (or C), so C = bias, C = 0, C + 0, or C.
TYPED_TEST(GemmDet, EmptyK) {
  using T = TypeParam;
  const Problem<T> p(5, 9, 0, false, false, 5);
  for (Epilogue epi : kEpilogues) EXPECT_TRUE(bitwise_equal(p.run(GemmOptions{}, epi), p.reference(epi))) << name(epi);
}

// gemm_det_row_sums: C as gemm_det gives it, and row_sums[m] += (r = 0; r = r + A(m,k), k in order)
// on every path and blocking (kc = 7 continues each chain across k-blocks, nc = 32 packs A once per
// column block but must sum it once); N = 0 still sums the rows, K = 0 adds nothing.
TYPED_TEST(GemmDet, RowSumsBesideTheProductBitwise) {
  using T = TypeParam;
  struct Shape {
    int M, N, K;
  };
  const std::vector<Shape> shapes = {{7, 5, 3}, {37, 45, 29}, {61, 70, 300}, {150, 37, 20}, {13, 0, 9}, {9, 11, 0}};
  std::uint64_t seed = 500;
  for (const Shape& s : shapes)
    for (bool at : {true, false}) {
      const Problem<T> p(s.M, s.N, s.K, at, false, seed += 10);
      const std::vector<T> sums0 = random_values<T>(static_cast<std::size_t>(s.M), seed + 5);
      std::vector<T> want_sums = sums0;
      for (int m = 0; m < s.M; ++m) {
        T r = T(0);
        for (int k = 0; k < s.K; ++k) r = r + p.A(m, k);
        want_sums[m] += r;
      }
      const std::vector<T> want_c = p.reference(Epilogue::chain_on_c);
      for (const auto& [cfg_name, opt] : configurations()) {
        auto da = to_device(p.a), db = to_device(p.b), dc = to_device(p.c0), ds = to_device(sums0);
        KernelWorkspace ws;
        gemm_det_row_sums<T>(ws, opt, s.M, s.N, s.K, p.A_of(da.data()), p.B_of(db.data()), dc.data(), p.ldc,
                             GemmOut::chain_on_c, ds.data());
        const std::string where = "M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                                  " K=" + std::to_string(s.K) + " A^T=" + std::to_string(at) + " path=" + cfg_name;
        const std::vector<T> got_c = to_host(dc), got_sums = to_host(ds);
        EXPECT_EQ(first_difference(got_c, want_c), want_c.size()) << where;
        EXPECT_EQ(first_difference(got_sums, want_sums), want_sums.size()) << where << ": row sums";
      }
    }
}

// The bitwise comparisons of this file have teeth: on the same data a multiply-then-add chain
// (what an implementation without explicit FMA would give) differs from the FMA chain, and
// gemm_det reproduces the FMA chain, not the other one.
TEST(GemmDetSensitivity, FmaChainDiffersFromMultiplyAdd) {
  const Problem<float> p(24, 40, 300, false, false, 1234);
  const auto ref = p.reference(Epilogue::plain);
  std::vector<float> mul_add = p.c0;
  for (int m = 0; m < p.M; ++m)
    for (int n = 0; n < p.N; ++n) {
      float acc = 0.0f;
      for (int k = 0; k < p.K; ++k) {
        const float prod = p.A(m, k) * p.B(k, n);
        acc = acc + prod;
      }
      mul_add[m * p.ldc + n] = acc;
    }
  EXPECT_FALSE(bitwise_equal(ref, mul_add));
  const auto got = p.run(GemmOptions{}, Epilogue::plain);
  EXPECT_TRUE(bitwise_equal(got, ref));
  EXPECT_FALSE(bitwise_equal(got, mul_add));
}

// A kept packed B (PackedB): with it enabled, calls give the reference bits for every blocking and
// orientation; a second call reads the kept copy (shown by changing B's values in place: the
// result is still the old product, which is why its owner disables it before B changes); another
// B, a disable/enable or other blocking repacks.
template <class T>
void kept_packed_operand_cases() {
  for (bool bt : {false, true}) {
    Problem<T> p(37, 45, 70, false, bt, bt ? 900 : 950);
    Problem<T> other(37, 45, 70, false, bt, bt ? 901 : 951);
    const std::vector<T> want = p.reference(Epilogue::bias);
    for (const auto& cfg : configurations()) {  // not a structured binding: the lambda captures opt
      const std::string& label = cfg.first;
      const GemmOptions& opt = cfg.second;
      if (opt.path == GemmPath::generic) continue;
      const std::string what = std::string(bt ? "B^T " : "B ") + label;
      auto da = to_device(p.a), db = to_device(p.b), dbias = to_device(p.bias), dob = to_device(other.b);
      KernelWorkspace ws;
      PackedB<T> kept;
      kept.enable();
      auto call = [&](const T* b) {
        auto dc = to_device(p.c0);
        gemm_det<T>(ws, opt, p.M, p.N, p.K, p.A_of(da.data()), p.B_of(b), dc.data(), p.ldc, dbias.data(),
                    GemmOut::overwrite, &kept);
        return to_host(dc);
      };
      EXPECT_TRUE(bitwise_equal(call(db.data()), want)) << what << ": first call (packs)";
      EXPECT_TRUE(kept.valid && kept.bytes() > 0) << what;
      EXPECT_TRUE(bitwise_equal(call(db.data()), want)) << what << ": second call (reads the copy)";
      Kokkos::deep_copy(db, dob);  // B changes in place while the copy is kept: the copy is read
      EXPECT_TRUE(bitwise_equal(call(db.data()), want)) << what << ": the kept copy was not used";
      kept.disable();
      kept.enable();
      Problem<T> changed = p;
      changed.b = other.b;
      EXPECT_TRUE(bitwise_equal(call(db.data()), changed.reference(Epilogue::bias))) << what << ": after re-enable";
      Kokkos::deep_copy(db, to_device(p.b));
      EXPECT_TRUE(bitwise_equal(call(dob.data()), changed.reference(Epilogue::bias))) << what << ": another B";
      EXPECT_TRUE(bitwise_equal(call(db.data()), want)) << what << ": back to the first B";
    }
  }
}

TYPED_TEST(GemmDet, KeptPackedOperandReusedUntilDisabled) {
  using T = TypeParam;
  if constexpr (!kMemHostAccessible) {  // constexpr: nvcc warns of an unreachable loop otherwise
    GTEST_SKIP() << "PackedB is a host-path feature";
  } else {
    kept_packed_operand_cases<T>();
  }
}

TEST(GemmDetArguments, RejectsBiasWithAccumulate) {
  float a = 1, b = 1, c = 0, bias = 0;
  KernelWorkspace ws;
  EXPECT_THROW(gemm_det<float>(ws, 1, 1, 1, row_major(&a, 1), row_major(&b, 1), &c, 1, &bias, GemmOut::accumulate),
               std::invalid_argument);
  EXPECT_THROW(gemm_det<float>(ws, 1, 1, 1, row_major(&a, 1), row_major(&b, 1), &c, 1, &bias, GemmOut::chain_on_c),
               std::invalid_argument);
  EXPECT_THROW(gemm_det<float>(ws, 2, 3, 1, row_major(&a, 1), row_major(&b, 3), &c, 2), std::invalid_argument);
}

}  // namespace
}  // namespace minipipe
