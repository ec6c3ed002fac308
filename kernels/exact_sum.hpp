// Order-independent exact accumulation across samples (DESIGN.md §4 rule 2).
// A value is rounded once to a 128-bit fixed-point number; sums of those are exact integer
// additions, so any micro-batch split, any W order and any all-reduce give the same bits.
#pragma once

#include "types.hpp"

namespace minipipe {

// Signed 128-bit two's-complement fixed point with kFracBits fractional bits:
// range +-2^47 (about 1.4e14) and resolution 2^-80 (about 8e-25).
struct Fixed128 {
  std::uint64_t lo = 0;
  std::int64_t hi = 0;
};

struct ExactSum {
  static constexpr int kFracBits = 80;

  // Rounds v to the fixed-point grid (nearest, ties to even). Sets overflow when |v| does not
  // fit or v is not finite.
  KOKKOS_INLINE_FUNCTION static Fixed128 from_double(double v, int& overflow) {
    Fixed128 r;
    // v * 2^80 is exact (a power-of-two scale of a finite double that stays in range).
    const double s = v * 1208925819614629174706176.0;  // 2^80
    const double limit = 85070591730234615865843651857942052864.0;  // 2^126
    if (!(s < limit && s > -limit)) {  // also catches NaN
      overflow = 1;
      return r;
    }
    const double n = ::rint(s);  // integer-valued, |n| < 2^126
    // Split |n| into two 64-bit words. For a non-negative integer-valued double every step is
    // exact: its 53 significant bits lie either above 2^64 or are kept whole in the remainder.
    // (A negative n would make the remainder 2^64 - |n|, which a double cannot hold exactly.)
    const double a = ::fabs(n);
    const double h = ::floor(a * 5.421010862427522e-20);  // floor(a / 2^64)
    const double l = a - h * 18446744073709551616.0;      // in [0, 2^64)
    // l < 2^64 does not fit int64; converting it to uint64 directly compiles to a data-dependent
    // branch on x86. Two exact 32-bit halves through int64 are branch-free and give the same bits.
    const double lh = ::floor(l * 2.3283064365386963e-10);  // floor(l / 2^32)
    const double ll = l - lh * 4294967296.0;                 // in [0, 2^32)
    std::uint64_t lo = (static_cast<std::uint64_t>(static_cast<std::int64_t>(lh)) << 32) |
                       static_cast<std::uint64_t>(static_cast<std::int64_t>(ll));
    std::uint64_t hi = static_cast<std::uint64_t>(static_cast<std::int64_t>(h));
    // Two's-complement negation when n < 0, without a branch: flip every bit, add one.
    const std::uint64_t neg = n < 0 ? ~std::uint64_t(0) : 0;
    lo ^= neg;
    hi ^= neg;
    const std::uint64_t inc = neg & 1u;
    const std::uint64_t lo2 = lo + inc;
    hi += (lo2 < lo) ? 1u : 0u;
    r.lo = lo2;
    r.hi = static_cast<std::int64_t>(hi);
    return r;
  }

  // acc += x exactly; sets overflow on signed 128-bit overflow.
  KOKKOS_INLINE_FUNCTION static void add(Fixed128& acc, const Fixed128& x, int& overflow) {
    const std::uint64_t lo = acc.lo + x.lo;
    const std::uint64_t carry = lo < acc.lo ? 1u : 0u;
    const std::uint64_t ahi = static_cast<std::uint64_t>(acc.hi);
    const std::uint64_t xhi = static_cast<std::uint64_t>(x.hi);
    const std::uint64_t hi = ahi + xhi + carry;
    // Signed overflow: both operands share a sign that the result does not.
    const std::uint64_t sign = std::uint64_t(1) << 63;
    if (((ahi ^ hi) & (xhi ^ hi) & sign) != 0) overflow = 1;
    acc.lo = lo;
    acc.hi = static_cast<std::int64_t>(hi);
  }

  KOKKOS_INLINE_FUNCTION static void add(Fixed128& acc, double v, int& overflow) {
    add(acc, from_double(v, overflow), overflow);
  }

  // The fixed-point value as a double (within an ulp; a function of the integer alone). The
  // magnitude is converted and the sign applied after, because hi * 2^64 + lo in doubles
  // cancels catastrophically for small negative values.
  KOKKOS_INLINE_FUNCTION static double to_double(const Fixed128& a) {
    const bool neg = a.hi < 0;
    std::uint64_t lo = a.lo, hi = static_cast<std::uint64_t>(a.hi);
    if (neg) {
      lo = ~lo + 1u;
      hi = ~hi + (lo == 0 ? 1u : 0u);
    }
    const double mag = static_cast<double>(hi) * 18446744073709551616.0 + static_cast<double>(lo);
    return (neg ? -mag : mag) * 8.271806125530277e-25;  // 2^-80
  }
};

// A view of exact accumulators plus an overflow flag, one per parameter tensor.
using ExactView = Kokkos::View<Fixed128*, Kokkos::LayoutRight, MemSpace>;
using FlagView = Kokkos::View<int, MemSpace>;

}  // namespace minipipe
