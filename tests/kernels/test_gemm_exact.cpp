// gemm_det_exact (the fused deterministic backward-weight) against a reference formed another way:
// each per-sample partial as a scalar fmaf chain, added with ExactSum::from_double + add, compared
// on the raw 128-bit accumulators; plus the overflow rule and the caller-owned workspace.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "kernels/gemm.hpp"

namespace minipipe {
namespace {

using test::to_device;

// dW-shaped problem: S samples of K rows; A_s(m,k) = dy(s*K + k, m), B_s(k,n) = x(s*K + k, n).
struct ExactProblem {
  int M, N, K, S;
  std::vector<float> dy, x;  // (S*K, M), (S*K, N)

  ExactProblem(int m, int n, int k, int s, std::uint64_t seed) : M(m), N(n), K(k), S(s) {
    dy = test::random_values<float>(static_cast<std::size_t>(S) * K * M, seed);
    x = test::random_values<float>(static_cast<std::size_t>(S) * K * N, seed + 1);
    // Rows of the output at very different scales, so the partials cover all four 32-bit limbs
    // of the 2^-80 grid and the rounded path below it (|p| < 2^-57); the rows scaled by 2^-26 and
    // 2^5 straddle the limb boundaries 2^-25 and 2^7, so the 16 values of one vector fall in two
    // limbs (the SIMD conversion's general path) where the other rows' mostly fall in one. The
    // row at 2^-58 gives partials near 2^-58, where p 2^80 has one fractional bit (a tie, rounded
    // to even, about half the time), and the row at 2^-140 subnormal ones (0 on the grid).
    const int exps[] = {-70, -45, -26, -20, 0, 5, 12, 25, -58, -140};
    constexpr int kScales = sizeof(exps) / sizeof(exps[0]);
    for (int r = 0; r < S * K; ++r)
      for (int c = 0; c < M; ++c) dy[static_cast<std::size_t>(r) * M + c] *= std::ldexp(1.0f, exps[c % kScales]);
  }

  float partial(int s, int m, int n) const {
    float p = 0;
    for (int k = 0; k < K; ++k) {
      const std::size_t row = static_cast<std::size_t>(s) * K + k;
      p = std::fmaf(dy[row * M + m], x[row * N + n], p);
    }
    return p;
  }

  // Exact accumulators and overflow flag of the reference, every sample added in order.
  std::vector<Fixed128> reference(int& overflow) const {
    std::vector<Fixed128> acc(static_cast<std::size_t>(M) * N);
    overflow = 0;
    for (int s = 0; s < S; ++s)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) ExactSum::add(acc[static_cast<std::size_t>(m) * N + n], partial(s, m, n), overflow);
    return acc;
  }

  // Exact row sums of the reference: each sample's chain r = r + A_s(m,k) over k in order (A_s(m,k)
  // = dy(s*K + k, m): a bias gradient), added with ExactSum::from_double + add.
  std::vector<Fixed128> row_reference() const {
    std::vector<Fixed128> acc(static_cast<std::size_t>(M));
    int overflow = 0;
    for (int s = 0; s < S; ++s)
      for (int m = 0; m < M; ++m) {
        float r = 0;
        for (int k = 0; k < K; ++k) r = r + dy[(static_cast<std::size_t>(s) * K + k) * M + m];
        ExactSum::add(acc[static_cast<std::size_t>(m)], r, overflow);
      }
    return acc;
  }

  // gemm_det_exact over the sample ranges `calls`, one fresh accumulator; with rows, also the row
  // sums into a fresh accumulator of M.
  std::vector<Fixed128> run(const GemmOptions& opt, const std::vector<std::pair<int, int>>& calls, int& overflow,
                            KernelWorkspace& ws, std::vector<Fixed128>* rows = nullptr) const {
    GradAccum<float> g("exact_test", static_cast<std::size_t>(M) * N, Mode::deterministic);
    GradAccum<float> r("exact_test_rows", static_cast<std::size_t>(M), Mode::deterministic);
    g.zero();
    r.zero();
    const ExactTarget rt = r.exact_target();
    const auto ddy = to_device(dy), dx = to_device(x);
    for (const auto& [s0, s1] : calls) {
      const float* a = ddy.data() + static_cast<std::size_t>(s0) * K * M;
      const float* b = dx.data() + static_cast<std::size_t>(s0) * K * N;
      gemm_det_exact(ws, opt, M, N, K, s1 - s0, transposed(a, M), static_cast<std::ptrdiff_t>(K) * M, row_major(b, N),
                     static_cast<std::ptrdiff_t>(K) * N, g.exact_target(), rows ? &rt : nullptr);
    }
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.exact());
    Kokkos::deep_copy(overflow, g.overflow);
    if (rows) {
      auto hr = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), r.exact());
      rows->assign(hr.data(), hr.data() + hr.extent(0));
      int row_overflow = 0;
      Kokkos::deep_copy(row_overflow, r.overflow);
      overflow |= row_overflow;
    }
    return std::vector<Fixed128>(h.data(), h.data() + h.extent(0));
  }
};

bool same_bits(const std::vector<Fixed128>& a, const std::vector<Fixed128>& b, std::string& where) {
  if (a.size() != b.size()) return false;
  for (std::size_t e = 0; e < a.size(); ++e)
    if (a[e].lo != b[e].lo || a[e].hi != b[e].hi) {
      where = "element " + std::to_string(e);
      return false;
    }
  return true;
}

std::vector<std::pair<std::string, GemmOptions>> exact_configs() {
  std::vector<std::pair<std::string, GemmOptions>> cfg;
  cfg.push_back({"automatic", GemmOptions{}});
  cfg.push_back({"scalar/default", GemmOptions{GemmPath::packed_scalar, 0, 0, 0, 0}});
  cfg.push_back({"scalar/mc6,nc16,group2", GemmOptions{GemmPath::packed_scalar, 6, 0, 16, 2}});
  if (gemm_det_has_simd()) {
    cfg.push_back({"simd/default", GemmOptions{GemmPath::packed_simd, 0, 0, 0, 0}});
    cfg.push_back({"simd/mc12,nc32,group1", GemmOptions{GemmPath::packed_simd, 12, 0, 32, 1}});
    cfg.push_back({"simd/mc24,nc64,group3", GemmOptions{GemmPath::packed_simd, 24, 0, 64, 3}});
  }
  return cfg;
}

TEST(GemmDetExact, EqualsPerSampleReferenceBitwise) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  // Edge tiles in both directions (the register tile is 12x32 or 6x16), K below and above 16.
  const ExactProblem shapes[] = {{29, 45, 13, 5, 11}, {12, 32, 40, 3, 12}, {50, 70, 7, 9, 13}};
  for (const auto& p : shapes) {
    int ref_ov = 0;
    const auto ref = p.reference(ref_ov);
    ASSERT_EQ(ref_ov, 0);
    // The limb-3 and the rounded path, ties and subnormal partials are really taken (else the
    // test would not cover them).
    bool hi_limb = false, tiny = false, tie = false, subnormal = false;
    for (int m = 0; m < p.M; ++m)
      for (int n = 0; n < p.N; ++n) {
        const float v = p.partial(0, m, n);
        const double scaled = std::fabs(static_cast<double>(v)) * std::ldexp(1.0, 80);
        hi_limb |= std::fabs(v) >= 65536.0f;                              // >= 2^16: limb 3 of the 2^-80 grid
        tiny |= std::fabs(v) < 6.9e-18f && v != 0;                        // < 2^-57
        tie |= scaled < 8388608.0 && scaled - std::floor(scaled) == 0.5;  // below 2^23, half-way
        subnormal |= std::fpclassify(v) == FP_SUBNORMAL;
      }
    EXPECT_TRUE(hi_limb && tiny && tie && subnormal) << "M=" << p.M << ": limb 3 " << hi_limb << ", below 2^-57 "
                                                     << tiny << ", ties " << tie << ", subnormal " << subnormal;
    KernelWorkspace ws;
    for (const auto& [name, opt] : exact_configs())
      for (const auto& calls :
           std::vector<std::vector<std::pair<int, int>>>{{{0, p.S}}, {{p.S - 1, p.S}, {0, 1}, {1, p.S - 1}}}) {
        int ov = 0;
        std::string where;
        EXPECT_TRUE(same_bits(p.run(opt, calls, ov, ws), ref, where))
            << name << ", M=" << p.M << " N=" << p.N << " K=" << p.K << ", " << calls.size() << " calls: " << where;
        EXPECT_EQ(ov, 0) << name;
      }
  }
}

// The row sums (a backward-weight's bias gradient, formed from the packed A panels) against the
// per-sample chains added exactly: every blocking, samples split across calls and groups, and row
// blocks that leave the first MC block (M = 50 with mc 12 and 24).
TEST(GemmDetExact, RowSumsEqualPerSampleChainsBitwise) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  const ExactProblem shapes[] = {{29, 45, 13, 5, 31}, {50, 70, 7, 9, 32}, {12, 1100, 40, 3, 33}};
  for (const auto& p : shapes) {
    int ref_ov = 0;
    const auto ref = p.reference(ref_ov);
    const auto row_ref = p.row_reference();
    KernelWorkspace ws;
    for (const auto& [name, opt] : exact_configs())
      for (const auto& calls :
           std::vector<std::vector<std::pair<int, int>>>{{{0, p.S}}, {{p.S - 1, p.S}, {0, 1}, {1, p.S - 1}}}) {
        int ov = 0;
        std::vector<Fixed128> rows;
        std::string where;
        EXPECT_TRUE(same_bits(p.run(opt, calls, ov, ws, &rows), ref, where)) << name << ", M=" << p.M << ": " << where;
        EXPECT_TRUE(same_bits(rows, row_ref, where))
            << name << ", M=" << p.M << " N=" << p.N << " K=" << p.K << ", " << calls.size() << " calls: row " << where;
        EXPECT_EQ(ov, 0) << name;
      }
  }
  // No columns: the sums are formed while A is packed for B, so the call is refused, not silently
  // short of its row sums.
  KernelWorkspace ws;
  GradAccum<float> g("exact_test", 0, Mode::deterministic), r("exact_test_rows", 4, Mode::deterministic);
  const ExactTarget rt = r.exact_target();
  const auto a = to_device(test::random_values<float>(8, 1));
  EXPECT_THROW(gemm_det_exact(ws, GemmOptions{}, 4, 0, 2, 1, transposed(a.data(), 4), 8, row_major(a.data(), 1), 0,
                              g.exact_target(), &rt),
               std::invalid_argument);
  GradAccum<float> short_rows("exact_test_rows", 3, Mode::deterministic);
  const ExactTarget st = short_rows.exact_target();
  GradAccum<float> g4("exact_test", 4, Mode::deterministic);
  EXPECT_THROW(gemm_det_exact(ws, GemmOptions{}, 4, 1, 2, 1, transposed(a.data(), 4), 8, row_major(a.data(), 1), 2,
                              g4.exact_target(), &st),
               std::invalid_argument);
}

// The SIMD path keeps only limb 1 of a tile until a value outside it appears, then starts limbs 0,
// 2 and 3 from zero: a first sample whose partials all lie in limb 1 (2^-25 <= |p| < 2^7), then
// samples in limb 2 (x 2^20) and limb 0 (x 2^-40), so the other limbs start after limb 1 holds a
// sum; every blocking, one call and split calls.
TEST(GemmDetExact, OtherLimbsJoinAfterLimbOneBitwise) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  ExactProblem p(40, 70, 24, 3, 41);
  p.dy = test::random_values<float>(p.dy.size(), 41);
  // Sample 0: dy, x in [0.5, 1), so every partial lies in [K/4, K) = [6, 24).
  const std::size_t dy_sample = static_cast<std::size_t>(p.K) * p.M, x_sample = static_cast<std::size_t>(p.K) * p.N;
  for (std::size_t e = 0; e < dy_sample; ++e) p.dy[e] = 0.5f + std::fabs(p.dy[e]) / 32;
  for (std::size_t e = 0; e < x_sample; ++e) p.x[e] = 0.5f + std::fabs(p.x[e]) / 32;
  const float scale[] = {1.0f, std::ldexp(1.0f, 20), std::ldexp(1.0f, -40)};
  for (int s = 1; s < p.S; ++s)
    for (std::size_t e = 0; e < dy_sample; ++e) p.dy[s * dy_sample + e] *= scale[s];
  int in_limb1 = 0;
  for (int m = 0; m < p.M; ++m)
    for (int n = 0; n < p.N; ++n) {
      const float v = std::fabs(p.partial(0, m, n));
      in_limb1 += v >= std::ldexp(1.0f, -25) && v < 128.0f;
    }
  EXPECT_EQ(in_limb1, p.M * p.N) << "sample 0 should lie in limb 1";
  int ref_ov = 0;
  const auto ref = p.reference(ref_ov);
  ASSERT_EQ(ref_ov, 0);
  KernelWorkspace ws;
  for (const auto& [name, opt] : exact_configs())
    for (const auto& calls : std::vector<std::vector<std::pair<int, int>>>{{{0, p.S}}, {{0, 1}, {1, p.S}}}) {
      int ov = 0;
      std::string where;
      EXPECT_TRUE(same_bits(p.run(opt, calls, ov, ws), ref, where))
          << name << ", " << calls.size() << " calls: " << where;
      EXPECT_EQ(ov, 0) << name;
    }
}

TEST(GemmDetExact, OverflowIsFlagged) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  KernelWorkspace ws;
  const GemmOptions opt{};
  auto flagged = [&](float big, int samples) {
    ExactProblem p(13, 33, 1, samples, 21);
    for (auto& v : p.dy) v = 0.5f;
    for (auto& v : p.x) v = 0.25f;
    for (int s = 0; s < samples; ++s) p.x[static_cast<std::size_t>(s) * p.K * p.N + 5] = big;  // n = 5: 0.5 big
    int ref_ov = 0, ov = 0;
    p.reference(ref_ov);
    p.run(opt, {{0, samples}}, ov, ws);
    EXPECT_EQ(ov, ref_ov) << "big=" << big;
    return ov != 0;
  };
  EXPECT_FALSE(flagged(1.0f, 1));
  EXPECT_TRUE(flagged(std::ldexp(1.0f, 47), 1));  // one partial of 2^46: outside the fixed point
  EXPECT_TRUE(flagged(std::numeric_limits<float>::quiet_NaN(), 1));
  EXPECT_TRUE(flagged(std::numeric_limits<float>::infinity(), 1));
  // Three partials of 1.5 * 2^45 each fit (< 2^46), their sum 1.125 * 2^47 leaves the signed
  // 128-bit range of the 2^-80 grid (|x| < 2^47); detected at the fold.
  EXPECT_TRUE(flagged(3.0f * std::ldexp(1.0f, 45), 3));
  EXPECT_FALSE(flagged(std::ldexp(1.0f, 44), 3));
}

// GradAccum::zero_values() leaves the zeros unwritten: exact() writes them when first asked, and a
// target from exact_target_overwrite() has the GEMM store every accumulator instead (zeros where it
// has nothing to add). Each accumulator first holds another product, so a kernel that read the
// unfilled words, or a fill that did not happen, leaves that product's bits behind.
TEST(GemmDetExact, DeferredZerosAreStoredOrFilled) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  const ExactProblem p(29, 45, 13, 5, 31), other(29, 45, 13, 5, 32);
  int ref_ov = 0;
  const auto ref = p.reference(ref_ov);
  ASSERT_EQ(ref_ov, 0);
  KernelWorkspace ws;
  const auto dy = to_device(p.dy), x = to_device(p.x), dy2 = to_device(other.dy), x2 = to_device(other.x);
  const std::ptrdiff_t as = static_cast<std::ptrdiff_t>(p.K) * p.M, bs = static_cast<std::ptrdiff_t>(p.K) * p.N;
  GradAccum<float> g("deferred_zeros", static_cast<std::size_t>(p.M) * p.N, Mode::deterministic);
  auto words = [&] {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.exact());
    return std::vector<Fixed128>(h.data(), h.data() + h.extent(0));
  };
  const std::vector<Fixed128> zeros(ref.size());
  // Accumulators that hold the other product's sums, then zeroed (deferred).
  auto dirty_then_zero = [&](const GemmOptions& opt) {
    g.zero();
    gemm_det_exact(ws, opt, p.M, p.N, p.K, p.S, transposed(dy2.data(), p.M), as, row_major(x2.data(), p.N), bs,
                   g.exact_target());
    std::string where;
    ASSERT_FALSE(same_bits(words(), zeros, where));
    g.zero_values();
  };
  for (const auto& [name, opt] : exact_configs()) {
    std::string where;
    dirty_then_zero(opt);
    EXPECT_TRUE(same_bits(words(), zeros, where)) << name << ": exact() after zero_values(), " << where;
    // Stored by the GEMM: one call (first fold stores, later groups add), then a second call that adds.
    dirty_then_zero(opt);
    gemm_det_exact(ws, opt, p.M, p.N, p.K, 2, transposed(dy.data(), p.M), as, row_major(x.data(), p.N), bs,
                   g.exact_target_overwrite());
    gemm_det_exact(ws, opt, p.M, p.N, p.K, p.S - 2, transposed(dy.data() + 2 * as, p.M), as,
                   row_major(x.data() + 2 * bs, p.N), bs, g.exact_target_overwrite());
    EXPECT_TRUE(same_bits(words(), ref, where)) << name << ": stored over unfilled words, " << where;
    // Nothing to add (no samples): the GEMM writes the zeros itself.
    dirty_then_zero(opt);
    gemm_det_exact(ws, opt, p.M, p.N, p.K, 0, transposed(dy.data(), p.M), as, row_major(x.data(), p.N), bs,
                   g.exact_target_overwrite());
    EXPECT_TRUE(same_bits(words(), zeros, where)) << name << ": no samples over unfilled words, " << where;
  }
  // A row-sum target is added to, never stored: an unfilled one is refused.
  GradAccum<float> rows("deferred_rows", static_cast<std::size_t>(p.M), Mode::deterministic);
  rows.zero();
  const ExactTarget unfilled_rows = rows.exact_target_overwrite();
  EXPECT_THROW(gemm_det_exact(ws, GemmOptions{}, p.M, p.N, p.K, p.S, transposed(dy.data(), p.M), as,
                              row_major(x.data(), p.N), bs, g.exact_target(), &unfilled_rows),
               std::logic_error);
}

// A call that adds every sample in one fold to accumulators known to be zero also stores the floats
// that GradAccum::finalize forms from the words (ExactSum::to_double, then float), and says so; a
// call with several folds, or onto words that hold sums already, stores none. GradAccum then skips
// its conversion for the view the floats went to, until anything may have changed the words.
TEST(GemmDetExact, OneFoldAlsoStoresFinalizesFloatsBitwise) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  const ExactProblem p(29, 45, 13, 5, 41);  // partials in every limb, ties, subnormals (see above)
  KernelWorkspace ws;
  const auto dy = to_device(p.dy), x = to_device(p.x);
  const std::ptrdiff_t as = static_cast<std::ptrdiff_t>(p.K) * p.M, bs = static_cast<std::ptrdiff_t>(p.K) * p.N;
  const std::size_t n = static_cast<std::size_t>(p.M) * p.N;
  const float sentinel = 12345.0f;
  auto host = [](const View1<float>& v) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    return std::vector<float>(h.data(), h.data() + h.extent(0));
  };
  auto same_floats = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const auto& [name, opt] : exact_configs()) {
    const bool one_fold = opt.group == 0 || opt.group >= p.S;
    GradAccum<float> g("final_floats", n, Mode::deterministic);
    View1<float> stored("stored", n), converted("converted", n);
    g.finalize_into(stored);
    Kokkos::deep_copy(stored, sentinel);
    g.zero();
    const bool said = gemm_det_exact(ws, opt, p.M, p.N, p.K, p.S, transposed(dy.data(), p.M), as,
                                     row_major(x.data(), p.N), bs, g.exact_target_overwrite());
    EXPECT_EQ(said, one_fold) << name;
    g.finalize_unchecked(converted);  // another view: converted from the words
    if (said) {
      EXPECT_TRUE(same_floats(host(stored), host(converted))) << name << ": stored floats differ from finalize's";
      g.floats_stored();
      Kokkos::deep_copy(stored, sentinel);  // finalize into the stored view converts nothing now...
      g.finalize_unchecked(stored);
      EXPECT_EQ(host(stored), std::vector<float>(n, sentinel)) << name;
      g.exact();  // ...until something may change the words
      g.finalize_unchecked(stored);
      EXPECT_TRUE(same_floats(host(stored), host(converted))) << name;
    } else {
      EXPECT_EQ(host(stored), std::vector<float>(n, sentinel)) << name << ": floats stored with several folds";
    }
    // A second call adds to sums already there: no floats.
    Kokkos::deep_copy(stored, sentinel);
    EXPECT_FALSE(gemm_det_exact(ws, opt, p.M, p.N, p.K, 1, transposed(dy.data(), p.M), as, row_major(x.data(), p.N), bs,
                                g.exact_target_overwrite()))
        << name;
    EXPECT_EQ(host(stored), std::vector<float>(n, sentinel)) << name;
  }
}

// The floats-only tests' problem (5 samples of 13 rows, 29 x 45 outputs): its operands on the
// device, the reference sums and the floats finalize forms from them.
struct FloatsOnlyProblem {
  ExactProblem p;
  std::vector<Fixed128> ref;
  View1<float> dy, x;
  std::ptrdiff_t as, bs;  // one sample's dy and x
  std::size_t n;          // outputs
  std::vector<float> expected;
  explicit FloatsOnlyProblem(std::uint64_t seed) : p(29, 45, 13, 5, seed) {
    int ov = 0;
    ref = p.reference(ov);
    EXPECT_EQ(ov, 0);
    dy = to_device(p.dy);
    x = to_device(p.x);
    as = static_cast<std::ptrdiff_t>(p.K) * p.M;
    bs = static_cast<std::ptrdiff_t>(p.K) * p.N;
    n = static_cast<std::size_t>(p.M) * p.N;
    expected.resize(n);
    for (std::size_t e = 0; e < n; ++e) expected[e] = static_cast<float>(ExactSum::to_double(ref[e]));
  }
};

// With GradAccum::words_unread (nothing but finalize reads this step's sums), the call that stores
// the floats may leave the words unwritten: the floats are still those of the reference sums
// (ExactSum::to_double, then float), the words it did write (a row's scalar tail) are right, and
// asking for the words afterwards is an error until the accumulators are zeroed again. A call
// with several folds stores every word, as without the promise.
TEST(GemmDetExact, FloatsOnlyWhenNothingReadsTheSums) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  const FloatsOnlyProblem f(43);
  const ExactProblem& p = f.p;
  const auto& ref = f.ref;
  const auto &dy = f.dy, &x = f.x;
  const std::ptrdiff_t as = f.as, bs = f.bs;
  const std::size_t n = f.n;
  const std::vector<float>& expected = f.expected;
  KernelWorkspace ws;
  // The AVX-512 fold stores 8 sums at a time and leaves them out; a scalar fold stores each anyway.
  const bool vector_fold = std::string(gemm_det_microkernel()).rfind("AVX-512F", 0) == 0;
  Fixed128 dirty;  // a word none of these sums has: where it stays, nothing was written
  dirty.lo = 0x0123456789abcdefULL;
  dirty.hi = 0x7edcba98;
  for (const auto& [name, opt] : exact_configs()) {
    const bool one_fold = opt.group == 0 || opt.group >= p.S;
    GradAccum<float> g("floats_only", n, Mode::deterministic);
    View1<float> stored("stored", n);
    g.finalize_into(stored);
    g.zero();
    Kokkos::deep_copy(g.exact(), dirty);
    g.zero_values();  // the zeros deferred: the words still hold `dirty`
    g.words_unread();
    const ExactTarget t = g.exact_target_overwrite();
    EXPECT_TRUE(t.floats_only) << name;
    const bool said =
        gemm_det_exact(ws, opt, p.M, p.N, p.K, p.S, transposed(dy.data(), p.M), as, row_major(x.data(), p.N), bs, t);
    EXPECT_EQ(said, one_fold) << name;
    auto words = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), t.exact);
    std::size_t unwritten = 0, wrong = 0;
    for (std::size_t e = 0; e < n; ++e) {
      if (words(e).lo == dirty.lo && words(e).hi == dirty.hi)
        ++unwritten;
      else if (words(e).lo != ref[e].lo || words(e).hi != ref[e].hi)
        ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << name;
    if (!said) {
      EXPECT_EQ(unwritten, 0u) << name << ": several folds must store every sum";
      EXPECT_NO_THROW(g.exact()) << name;
      continue;
    }
    g.floats_stored();
    if (vector_fold) {
      EXPECT_GT(unwritten, n / 2) << name << ": the sums were stored although nothing reads them";
    }
    g.finalize_unchecked(stored);  // converts nothing: the floats are the kernel's
    auto floats = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), stored);
    EXPECT_EQ(std::memcmp(floats.data(), expected.data(), n * sizeof(float)), 0) << name;
    EXPECT_THROW(g.exact(), std::logic_error) << name;
    EXPECT_THROW(g.exact_target_overwrite(), std::logic_error) << name;
    g.zero_values();  // a new step: the words are zeros again
    auto zeros = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.exact());
    std::size_t nonzero = 0;
    for (std::size_t e = 0; e < n; ++e) nonzero += zeros(e).lo != 0 || zeros(e).hi != 0;
    EXPECT_EQ(nonzero, 0u) << name;
  }
}

// words_unread(samples): only the call that adds all `samples` may leave the words out. A step of
// held samples added in two calls (samples 0-1, then the rest) stores every word and converts as
// usual; the same step in one call stores the floats alone.
TEST(GemmDetExact, FloatsOnlyForTheCallWithEveryPromisedSample) {
  if (!Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible)
    GTEST_SKIP() << "the fused path is host-only";
  const FloatsOnlyProblem f(47);
  const ExactProblem& p = f.p;
  const std::size_t n = f.n;
  KernelWorkspace ws;
  GradAccum<float> g("whole_step", n, Mode::deterministic);
  View1<float> stored("stored", n);
  g.finalize_into(stored);
  auto call = [&](int s0, int S) {
    const ExactTarget t = g.exact_target_overwrite(S);
    const bool floats = gemm_det_exact(ws, GemmOptions{}, p.M, p.N, p.K, S, transposed(f.dy.data() + s0 * f.as, p.M),
                                       f.as, row_major(f.x.data() + s0 * f.bs, p.N), f.bs, t);
    if (floats) g.floats_stored();
    return t.floats_only;
  };
  auto floats_now = [&] {
    g.finalize_unchecked(stored);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), stored);
    return std::memcmp(h.data(), f.expected.data(), n * sizeof(float)) == 0;
  };
  g.zero();
  g.words_unread(p.S);
  EXPECT_FALSE(call(0, 2)) << "two of five samples: not the whole sum";
  EXPECT_FALSE(call(2, p.S - 2)) << "accumulators no longer zero";
  EXPECT_NO_THROW(g.exact());
  auto words = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.exact());
  std::size_t wrong = 0;
  for (std::size_t e = 0; e < n; ++e) wrong += words(e).lo != f.ref[e].lo || words(e).hi != f.ref[e].hi;
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(floats_now());
  g.zero_values();
  g.words_unread(p.S);
  EXPECT_TRUE(call(0, p.S)) << "every promised sample in one call";
  EXPECT_TRUE(floats_now());
  EXPECT_THROW(g.exact(), std::logic_error);
  g.zero_values();
  g.words_unread(p.S + 1);
  EXPECT_FALSE(call(0, p.S)) << "a sample short of the promise";
  EXPECT_NO_THROW(g.exact());
  EXPECT_TRUE(floats_now());
}

TEST(KernelWorkspace, GrowsOnceAndReportsItsBytes) {
  KernelWorkspace ws;
  EXPECT_EQ(ws.bytes(), 0u);
  const int M = 40, N = 50, K = 300;
  const auto a = to_device(test::random_values<float>(static_cast<std::size_t>(M) * K, 1));
  const auto b = to_device(test::random_values<float>(static_cast<std::size_t>(K) * N, 2));
  View1<float> c("c", static_cast<std::size_t>(M) * N);
  // The packed host path (what automatic takes here unless MINIPIPE_KERNEL_PATH=device forces the
  // device path, which needs no workspace).
  GemmOptions packed;
  packed.path = gemm_det_has_simd() ? GemmPath::packed_simd : GemmPath::packed_scalar;
  packed.kc = 256;  // k-blocks of 256 (not the CPU's choice): K = 300 takes two, so C is saved
  gemm_det<float>(ws, packed, M, N, K, row_major(a.data(), K), row_major(b.data(), N), c.data(), N, nullptr,
                  GemmOut::accumulate);
  const std::size_t bytes = ws.bytes();
  // Packed A and B blocks and the saved C of accumulate mode (K > kc) at least.
  EXPECT_GE(bytes, sizeof(float) * (static_cast<std::size_t>(M) * N + static_cast<std::size_t>(M + N) * 256));
  const float* pa = ws.get<float>(KernelWorkspace::gemm_a, 1);
  gemm_det<float>(ws, packed, M, N, K, row_major(a.data(), K), row_major(b.data(), N), c.data(), N, nullptr,
                  GemmOut::accumulate);
  EXPECT_EQ(ws.bytes(), bytes) << "a second call of the same shape must not allocate";
  EXPECT_EQ(ws.get<float>(KernelWorkspace::gemm_a, 1), pa);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pa) % 64, 0u);
  ws.release();
  EXPECT_EQ(ws.bytes(), 0u);
}

}  // namespace
}  // namespace minipipe
