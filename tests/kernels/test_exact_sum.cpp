// The 128-bit fixed-point accumulator: exact (order-independent) sums, rounding to the grid,
// overflow detection, and the branch-free conversion against a direct integer reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/exact_row.hpp"
#include "kernels/exact_sum.hpp"

using minipipe::ExactSum;
using minipipe::Fixed128;

namespace {

// Reference conversion with unsigned __int128: round(v * 2^80) to nearest even.
unsigned __int128 reference_bits(double v) {
  const double s = std::ldexp(v, ExactSum::kFracBits);
  const double n = std::nearbyint(s);
  const bool neg = n < 0;
  const double a = std::fabs(n);
  const unsigned __int128 mag =
      (static_cast<unsigned __int128>(static_cast<std::uint64_t>(std::floor(std::ldexp(a, -64)))) << 64) +
      static_cast<std::uint64_t>(a - std::ldexp(std::floor(std::ldexp(a, -64)), 64));
  return neg ? ~mag + 1 : mag;
}

unsigned __int128 bits(const Fixed128& f) {
  return (static_cast<unsigned __int128>(static_cast<std::uint64_t>(f.hi)) << 64) | f.lo;
}

}  // namespace

TEST(ExactSum, ConversionMatchesInt128Reference) {
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  int ov = 0;
  for (int i = 0; i < 200000; ++i) {
    const double v = std::ldexp(mant(g), static_cast<int>(g() % 120) - 85);  // 2^-85 .. 2^35
    ASSERT_EQ(bits(ExactSum::from_double(v, ov)), reference_bits(v)) << v;
  }
  EXPECT_EQ(ov, 0);
  // Half-way cases round to even at the last fixed-point bit.
  EXPECT_EQ(bits(ExactSum::from_double(std::ldexp(0.5, -80), ov)), 0u);
  EXPECT_EQ(bits(ExactSum::from_double(std::ldexp(1.5, -80), ov)), 2u);
}

TEST(ExactSum, SumIsExactAndOrderIndependent) {
  std::mt19937_64 g(11);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(5000);
  for (auto& x : v) x = std::ldexp(d(g), static_cast<int>(g() % 40) - 30);
  int ov = 0;
  Fixed128 a, b;
  for (double x : v) ExactSum::add(a, x, ov);
  std::shuffle(v.begin(), v.end(), g);
  for (double x : v) ExactSum::add(b, x, ov);
  EXPECT_EQ(bits(a), bits(b));
  // x + (-x) over every element returns exactly zero, whatever the magnitudes.
  for (double x : v) ExactSum::add(a, -x, ov);
  EXPECT_EQ(bits(a), 0u);
  EXPECT_EQ(ov, 0);
  // A value that a double sum would absorb survives: 1e10 + 1e-10 - 1e10 = 1e-10 (to 2^-80).
  Fixed128 c;
  ExactSum::add(c, 1e10, ov);
  ExactSum::add(c, 1e-10, ov);
  ExactSum::add(c, -1e10, ov);
  EXPECT_NEAR(ExactSum::to_double(c), 1e-10, 1e-23);
}

TEST(ExactSum, OverflowAndNonFiniteAreFlagged) {
  int ov = 0;
  ExactSum::from_double(std::ldexp(1.0, 47), ov);
  EXPECT_EQ(ov, 1);
  ov = 0;
  ExactSum::from_double(std::nan(""), ov);
  EXPECT_EQ(ov, 1);
  ov = 0;
  Fixed128 a;
  for (int i = 0; i < 4; ++i) ExactSum::add(a, std::ldexp(1.0, 45), ov);  // 2^47 overflows the sum
  EXPECT_EQ(ov, 1);
}

TEST(ExactSum, SmallNegativeValuesConvertBack) {
  int ov = 0;
  for (double v : {-1e-20, -3.5e-12, -1.0, -2.5e10, 7e-21}) {
    Fixed128 a;
    ExactSum::add(a, v, ov);
    EXPECT_NEAR(ExactSum::to_double(a), v, std::abs(v) * 1e-15 + 1e-24) << v;
  }
  EXPECT_EQ(ov, 0);
}

// ---- Float limb path (Linear backward_weight): from_float, float_limb + add_limbs ----

namespace {

float float_of_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// from_float must give the reference bits of double(v) and from_double's overflow flag.
void expect_float_matches(float v) {
  int ov_f = 0, ov_d = 0;
  const Fixed128 f = ExactSum::from_float(v, ov_f);
  const Fixed128 d = ExactSum::from_double(static_cast<double>(v), ov_d);
  ASSERT_EQ(ov_f, ov_d) << v;
  ASSERT_EQ(bits(f), bits(d)) << v;
  if (!ov_d) {
    ASSERT_EQ(bits(f), reference_bits(static_cast<double>(v))) << v;
  }
}

// Sum of values through limbs, folding every `chunk` values as the Linear kernel does.
Fixed128 limb_sum(const std::vector<float>& v, int chunk, int& ov) {
  Fixed128 acc;
  std::int64_t a[ExactSum::kLimbs] = {0, 0, 0, 0};
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::int64_t w, j, bd;
    ExactSum::float_limb(v[i], w, j, bd);
    for (int k = 0; k < ExactSum::kLimbs; ++k) a[k] += j == k ? w : 0;
    bad |= bd;
    if ((i + 1) % chunk == 0 || i + 1 == v.size()) {
      ExactSum::add_limbs(acc, a, ov);
      for (auto& x : a) x = 0;
    }
  }
  if (bad) ov = 1;
  return acc;
}

Fixed128 double_sum(const std::vector<float>& v, int& ov) {
  Fixed128 acc;
  for (float x : v) ExactSum::add(acc, static_cast<double>(x), ov);
  return acc;
}

}  // namespace

TEST(ExactSum, FloatConversionMatchesInt128Reference) {
  std::mt19937_64 g(17);
  // Random bit patterns over every exponent below the overflow threshold (both signs,
  // subnormals included), and over all exponents (inf, NaN and too-large values must flag).
  for (int i = 0; i < 400000; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(g());
    const std::uint32_t q = static_cast<std::uint32_t>(g() % 173);
    expect_float_matches(float_of_bits((u & 0x807FFFFFu) | (q << 23)));
    expect_float_matches(float_of_bits(u));
  }
  // Dense around the rounding region: |v| near 2^-81 .. 2^-56, where the grid rounds.
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(g());
    const std::uint32_t q = static_cast<std::uint32_t>(g() % 80);  // 0..79 (subnormal .. 2^-48)
    expect_float_matches(float_of_bits((u & 0x807FFFFFu) | (q << 23)));
  }
  // Exhaustive over the low mantissa bits for every exponent of the rounding region, with the
  // high bits fixed in a few ways: covers every tie (rem == half) with odd and even quotients.
  for (std::uint32_t q = 0; q < 72; ++q)
    for (std::uint32_t hi : {0u, 0x400000u, 0x7FC000u, 0x2AA000u})
      for (std::uint32_t lo = 0; lo < (1u << 14); ++lo)
        for (std::uint32_t s : {0u, 0x80000000u}) expect_float_matches(float_of_bits(s | (q << 23) | hi | lo));
  // Signed zeros, smallest subnormal, values at and around 2^-81 (0.5 ulp) and 2^-80 (1 ulp).
  for (float v : {0.0f, -0.0f, float_of_bits(1u), float_of_bits(0x80000001u), std::ldexp(1.0f, -81),
                  -std::ldexp(1.0f, -81), std::nextafter(std::ldexp(1.0f, -81), 1.0f),
                  -std::nextafter(std::ldexp(1.0f, -81), 1.0f), std::nextafter(std::ldexp(1.0f, -81), 0.0f),
                  std::ldexp(1.5f, -81), std::ldexp(1.0f, -80), std::ldexp(1.5f, -80), std::ldexp(2.5f, -80),
                  -std::ldexp(1.5f, -80), -std::ldexp(2.5f, -80), std::ldexp(1.0f, -57), std::ldexp(1.0f, -56)})
    expect_float_matches(v);
  int ov = 0;
  EXPECT_EQ(bits(ExactSum::from_float(std::ldexp(1.0f, -81), ov)), 0u);  // tie -> even 0
  EXPECT_EQ(bits(ExactSum::from_float(std::ldexp(1.5f, -80), ov)), 2u);  // tie -> even 2
  EXPECT_EQ(bits(ExactSum::from_float(std::ldexp(2.5f, -80), ov)), 2u);  // tie -> even 2
  EXPECT_EQ(bits(ExactSum::from_float(-std::ldexp(1.5f, -80), ov)), ~static_cast<unsigned __int128>(0) - 1);  // -2
  EXPECT_EQ(ov, 0);
  // Overflow boundary: the largest float below 2^46 fits, 2^46 and beyond (and inf/NaN) flag.
  const float below = std::nextafter(std::ldexp(1.0f, 46), 0.0f);
  for (float v : {below, -below}) {
    ov = 0;
    expect_float_matches(v);
    ExactSum::from_float(v, ov);
    EXPECT_EQ(ov, 0) << v;
  }
  for (float v : {std::ldexp(1.0f, 46), -std::ldexp(1.0f, 46), std::ldexp(1.0f, 47), 3.0e38f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    ov = 0;
    EXPECT_EQ(bits(ExactSum::from_float(v, ov)), 0u) << v;
    EXPECT_EQ(ov, 1) << v;
  }
}

TEST(ExactSum, FloatLimbSumMatchesPerValueAdd) {
  std::mt19937_64 g(23);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(g() % 1000);
    const int lo_exp = -100 + static_cast<int>(g() % 90);  // mixes grid-rounded and exact values
    const int span = 1 + static_cast<int>(g() % 60);
    std::vector<float> v(n);
    for (auto& x : v) {
      const std::uint32_t u = static_cast<std::uint32_t>(g());
      const int e = std::min(lo_exp + static_cast<int>(g() % span), 36);  // sum < 2^46
      x = std::ldexp(static_cast<float>(u & 0xFFFFFFu) * std::ldexp(1.0f, -24), e) * ((u >> 31) ? -1.0f : 1.0f);
    }
    int ov_l = 0, ov_d = 0;
    const Fixed128 l = limb_sum(v, ExactSum::kMaxLimbAdds, ov_l);
    const Fixed128 d = double_sum(v, ov_d);
    ASSERT_EQ(bits(l), bits(d)) << trial;
    ASSERT_EQ(ov_l, 0);
    ASSERT_EQ(ov_d, 0);
    // Any chunking gives the same integer.
    int ov_1 = 0;
    ASSERT_EQ(bits(limb_sum(v, 1 + static_cast<int>(g() % 37), ov_1)), bits(d));
    ASSERT_EQ(ov_1, 0);
  }
  // Worst case for the int64 limb sums: kMaxLimbAdds values of the largest word (24 mantissa
  // bits shifted by 31) in one limb, same sign, for each limb that cannot overflow the total.
  for (int j = 0; j < 3; ++j)
    for (float sgn : {1.0f, -1.0f}) {
      const float m = sgn * std::ldexp(static_cast<float>((1u << 24) - 1u), 31 + 32 * j - 80);
      std::vector<float> v(ExactSum::kMaxLimbAdds * (j == 2 ? 1 : 3), m);  // j = 2: total < 2^127
      int ov_l = 0, ov_d = 0;
      ASSERT_EQ(bits(limb_sum(v, ExactSum::kMaxLimbAdds, ov_l)), bits(double_sum(v, ov_d))) << j;
      EXPECT_EQ(ov_l, 0);
      EXPECT_EQ(ov_d, 0);
    }
}

TEST(ExactSum, FloatLimbSumOverflowIsExact) {
  // -2^47 is the most negative value of the range: reached exactly, no overflow.
  std::vector<float> v(4, -std::ldexp(1.0f, 45));
  int ov = 0;
  Fixed128 s = limb_sum(v, ExactSum::kMaxLimbAdds, ov);
  EXPECT_EQ(ov, 0);
  EXPECT_EQ(s.hi, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(s.lo, 0u);
  // +2^47 is one grid step past the largest value: flagged, and the bits are the total mod 2^128
  // (what the per-value chain of add() stores).
  v.assign(4, std::ldexp(1.0f, 45));
  ov = 0;
  int ov_d = 0;
  s = limb_sum(v, ExactSum::kMaxLimbAdds, ov);
  EXPECT_EQ(ov, 1);
  EXPECT_EQ(bits(s), bits(double_sum(v, ov_d)));
  EXPECT_EQ(ov_d, 1);
  // The largest value of the range, 2^47 - 2^-80, is exact; one more grid step flags.
  Fixed128 top;
  top.lo = ~std::uint64_t(0);
  top.hi = std::numeric_limits<std::int64_t>::max();
  std::int64_t one[ExactSum::kLimbs] = {1, 0, 0, 0};
  std::int64_t zero[ExactSum::kLimbs] = {0, 0, 0, 0};
  ov = 0;
  Fixed128 t = top;
  ExactSum::add_limbs(t, zero, ov);
  EXPECT_EQ(ov, 0);
  ExactSum::add_limbs(t, one, ov);
  EXPECT_EQ(ov, 1);
  // Large limb sums that cancel inside one fold do not flag (exact 192-bit total), while the
  // same limbs pushing an in-range total out of range do.
  std::int64_t big[ExactSum::kLimbs] = {0, 0, 0, std::int64_t(1) << 40};  // 2^136 on the grid
  std::int64_t back[ExactSum::kLimbs] = {0, 0, 0, -(std::int64_t(1) << 40)};
  ov = 0;
  Fixed128 z;
  ExactSum::add_limbs(z, big, ov);
  EXPECT_EQ(ov, 1);
  ov = 0;
  std::int64_t mix[ExactSum::kLimbs] = {-1, 0, -(std::int64_t(1) << 32), std::int64_t(1)};  // 2^96 - 2^96 - 1
  Fixed128 m;
  ExactSum::add_limbs(m, mix, ov);
  EXPECT_EQ(ov, 0);
  EXPECT_EQ(bits(m), ~static_cast<unsigned __int128>(0));  // -1
  ExactSum::add_limbs(m, back, ov);
  EXPECT_EQ(ov, 1);
  // A non-finite value anywhere flags, whatever else is summed.
  v.assign(10, 1.0f);
  v[7] = std::numeric_limits<float>::quiet_NaN();
  ov = 0;
  limb_sum(v, 3, ov);
  EXPECT_EQ(ov, 1);
}

// ---- Rows of accumulators (kernels/exact_row.hpp, the host paths of Embedding and LayerNorm) ----

// exact_row::add over a row must leave every accumulator and the overflow flag exactly as
// ExactSum::add of double(v[j]) per element does: values of every exponent (subnormal, huge, inf,
// NaN), accumulators of every magnitude (carries out of the low word, signed overflow at the top),
// and row lengths that end inside a SIMD block.
TEST(ExactRow, FloatRowMatchesPerElementAdd) {
  std::mt19937_64 g(20261204);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + static_cast<int>(g() % 150);
    std::vector<float> v(n);
    std::vector<Fixed128> acc(n), ref(n);
    for (int j = 0; j < n; ++j) {
      const std::uint32_t u = static_cast<std::uint32_t>(g());
      // Mostly the exponents gradients take (|v| from 2^-90 to 2^50), sometimes any bit pattern.
      const std::uint32_t q = trial % 5 == 0 ? (u >> 23) & 0xFFu : 37u + static_cast<std::uint32_t>(g() % 140);
      v[j] = float_of_bits((u & 0x807FFFFFu) | (q << 23));
      acc[j].lo = g();
      const int kind = static_cast<int>(g() % 4);  // small, large, near the top of the range, any
      acc[j].hi = kind == 0   ? static_cast<std::int64_t>(g() % 5) - 2
                  : kind == 1 ? static_cast<std::int64_t>(g() >> 20) * (g() % 2 ? 1 : -1)
                  : kind == 2
                      ? (g() % 2 ? std::numeric_limits<std::int64_t>::max() - static_cast<std::int64_t>(g() % 3)
                                 : std::numeric_limits<std::int64_t>::min() + static_cast<std::int64_t>(g() % 3))
                      : static_cast<std::int64_t>(g());
      ref[j] = acc[j];
    }
    int ov = 0, ov_ref = 0;
    minipipe::exact_row::add(acc.data(), v.data(), n, ov);
    for (int j = 0; j < n; ++j) ExactSum::add(ref[j], static_cast<double>(v[j]), ov_ref);
    ASSERT_EQ(ov, ov_ref) << "trial " << trial << " n " << n;
    for (int j = 0; j < n; ++j) ASSERT_EQ(bits(acc[j]), bits(ref[j])) << "trial " << trial << " element " << j;
  }
}

// Without overflow the flag stays clear: a row of ordinary values into small accumulators.
TEST(ExactRow, OrdinaryRowRaisesNoFlag) {
  std::vector<float> v(131);
  std::vector<Fixed128> acc(v.size()), ref(v.size());
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = (static_cast<float>(j) - 60.0f) * 0.37f;
  int ov = 0, ov_ref = 0;
  for (int rep = 0; rep < 3; ++rep) {
    minipipe::exact_row::add(acc.data(), v.data(), static_cast<int>(v.size()), ov);
    for (std::size_t j = 0; j < v.size(); ++j) ExactSum::add(ref[j], static_cast<double>(v[j]), ov_ref);
  }
  EXPECT_EQ(ov, 0);
  EXPECT_EQ(ov_ref, 0);
  for (std::size_t j = 0; j < v.size(); ++j) ASSERT_EQ(bits(acc[j]), bits(ref[j])) << j;
}
