// The 128-bit fixed-point accumulator: exact (order-independent) sums, rounding to the grid,
// overflow detection, and the branch-free conversion against a direct integer reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

TEST(ExactSum, ToDoubleOfSmallNegativeValues) {
  int ov = 0;
  for (double v : {-1e-20, -3.5e-12, -1.0, -2.5e10, 7e-21}) {
    Fixed128 a;
    ExactSum::add(a, v, ov);
    EXPECT_NEAR(ExactSum::to_double(a), v, std::abs(v) * 1e-15 + 1e-24) << v;
  }
  EXPECT_EQ(ov, 0);
}
