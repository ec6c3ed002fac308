// Order-independent exact accumulation across samples (docs/design.md §4 rule 2).
// A value is rounded once to a 128-bit fixed-point number; sums of those are exact integer
// additions, so any micro-batch split, any W order and any all-reduce give the same bits.
#pragma once

#include <cstring>

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
    const double s = v * 1208925819614629174706176.0;               // 2^80
    const double limit = 85070591730234615865843651857942052864.0;  // 2^126
    if (!(s < limit && s > -limit)) {                               // also catches NaN
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
    const double ll = l - lh * 4294967296.0;                // in [0, 2^32)
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

  // ---- Float fast path: carry-save limbs (Linear backward_weight, docs/design.md §4 rule 2) ----
  //
  // A finite float is m * 2^(q - 150) with m < 2^24 (q = biased exponent; subnormals use q = 1),
  // so on the 2^-80 grid it is m * 2^sh with sh = max(q,1) - 70 in [-69, 102] for |v| < 2^46.
  //   sh >= 0: exact; the 24 mantissa bits shifted by sh % 32 fit in 55 bits of a 64-bit word
  //            that sits at 32-bit limb j = sh / 32 (j <= 3), i.e. the value is w * 2^(32 j).
  //   sh <  0: (|v| < 2^-57) rounded once to the nearest integer, ties to even (limb 0).
  // This is exactly the integer from_double(v) produces. q >= 173 (|v| >= 2^46, inf, NaN) is
  // the same overflow from_double reports, and contributes 0 as there.
  static constexpr int kLimbs = 4;
  // Signed limb values are below 2^55 in magnitude: this many of them can be summed in an int64
  // limb accumulator without overflow (256 * (2^24 - 1) * 2^31 < 2^63), before add_limbs.
  static constexpr int kMaxLimbAdds = 256;

  // The float's signed limb word w (|w| < 2^55) and limb index j; bad = 1 when it overflows.
  KOKKOS_INLINE_FUNCTION static void float_limb(float v, std::int64_t& w, std::int64_t& j, std::int64_t& bad) {
    std::uint32_t u32;
    ::memcpy(&u32, &v, sizeof u32);  // bit cast (valid in host and CUDA/HIP device code)
    float_limb(v, u32, w, j, bad);
  }

  // float_limb given also v's IEEE-754 bit pattern u32 (a kernel can load a block of bits at
  // once). Branch-free and without 1 << variable or signed 64-bit shifts (which AVX2 lacks), so
  // a loop over lanes vectorizes with GCC on AVX2.
  KOKKOS_INLINE_FUNCTION static void float_limb(float v, std::uint32_t u32, std::int64_t& w, std::int64_t& j,
                                                std::int64_t& bad) {
    const std::uint64_t u = u32;
    const std::uint64_t q = (u >> 23) & 0xFFu;
    const std::int64_t qs = static_cast<std::int64_t>(q);
    // q >= 70 (sh >= 0, always a normal float): m 2^sh = (m << (sh % 32)) 2^(32 (sh / 32)).
    const std::uint64_t m = (u & 0x7FFFFFu) | 0x800000u;
    const std::uint64_t wpos = m << ((q + 26u) & 31u);   // (q - 70) mod 32
    const std::uint64_t jpos = ((q - 70u) & 127u) >> 5;  // (q - 70) / 32 for 70 <= q < 198
    // q < 70: |v| 2^80 = m 2^sh < 2^23 is exact in float (a power-of-two scale of a normal
    // float, or of a subnormal one into the normal range); adding 2^23 rounds it to an integer,
    // nearest even (IEEE default rounding, as rint in from_double), and the integer is the low
    // bits of the sum's pattern. A subnormal v gives 0 here, as it must (|v 2^80| < 2^-46), also
    // where subnormal inputs are flushed to zero. No contraction hazard: the product is exact.
    const float a = v * ((u >> 31) != 0 ? -1208925819614629174706176.0f : 1208925819614629174706176.0f);
    const float t = a + 8388608.0f;  // 2^23
    std::uint32_t tb;
    ::memcpy(&tb, &t, sizeof tb);
    const std::uint64_t wneg = static_cast<std::uint32_t>(tb - 0x4B000000u);  // bits of 2^23
    // Masks (all ones / zero) rather than nested selects, which GCC leaves as control flow.
    const std::uint64_t pos = std::uint64_t(0) - static_cast<std::uint64_t>(qs >= 70);
    const std::uint64_t ok = std::uint64_t(0) - static_cast<std::uint64_t>(qs < 173);  // |v| < 2^46, finite
    const std::uint64_t mag = ((wpos & pos) | (wneg & ~pos)) & ok;
    const std::uint64_t sneg = std::uint64_t(0) - (u >> 31);  // all ones when v < 0
    w = static_cast<std::int64_t>((mag ^ sneg) - sneg);       // +-mag
    j = static_cast<std::int64_t>(jpos & pos);
    bad = static_cast<std::int64_t>(~ok & 1u);
  }

  // acc += a[0] + a[1] 2^32 + a[2] 2^64 + a[3] 2^96 exactly (signed limbs). The sum is formed in
  // 192 bits, so overflow is detected exactly: it is flagged iff the true new total leaves the
  // signed 128-bit range; the stored bits are the total mod 2^128, as a chain of add() gives.
  KOKKOS_INLINE_FUNCTION static void add_limbs(Fixed128& acc, const std::int64_t a[kLimbs], int& overflow) {
    std::uint64_t w0 = acc.lo, w1 = static_cast<std::uint64_t>(acc.hi), w2 = static_cast<std::uint64_t>(acc.hi >> 63);
    add192(w0, w1, w2, u(a[0]), u(a[0] >> 63), u(a[0] >> 63));
    add192(w0, w1, w2, u(a[1]) << 32, u(a[1] >> 32), u(a[1] >> 63));
    add192(w0, w1, w2, 0u, u(a[2]), u(a[2] >> 63));
    add192(w0, w1, w2, 0u, u(a[3]) << 32, u(a[3] >> 32));
    if (w2 != u(static_cast<std::int64_t>(w1) >> 63)) overflow = 1;
    acc.lo = w0;
    acc.hi = static_cast<std::int64_t>(w1);
  }

  // acc += a0 + a1 2^32 + a2 2^64 + a3 2^96 exactly: the bits and the overflow rule of add_limbs
  // for limb sums of at most kMaxLimbAdds float_limb words (|a_j| <= 2^63 - 2^39). The limbs are
  // first carry-normalized (a0..a2 into [0, 2^32), which cannot overflow within that bound), so
  // the sum is three 64-bit words with no carries between them; then one 128-bit add whose third
  // word detects overflow. Branch-free, so a loop over lanes vectorizes.
  KOKKOS_INLINE_FUNCTION static void fold_limbs(Fixed128& acc, std::int64_t a0, std::int64_t a1, std::int64_t a2,
                                                std::int64_t a3, std::int64_t& overflow) {
    constexpr std::int64_t kLow = 0xFFFFFFFF;
    a1 += a0 >> 32;
    a0 &= kLow;
    a2 += a1 >> 32;
    a1 &= kLow;
    a3 += a2 >> 32;
    a2 &= kLow;
    const std::uint64_t s0 = u(a0) | (u(a1) << 32);
    const std::uint64_t s1 = u(a2) | (u(a3) << 32);
    const std::int64_t s2 = a3 >> 32;
    const std::uint64_t r0 = acc.lo + s0;
    const std::uint64_t c0 = r0 < s0 ? 1u : 0u;
    const std::uint64_t t = u(acc.hi) + s1;
    const std::uint64_t c1 = t < s1 ? 1u : 0u;
    const std::uint64_t r1 = t + c0;
    const std::uint64_t c2 = r1 < t ? 1u : 0u;
    const std::int64_t r2 = (acc.hi >> 63) + s2 + static_cast<std::int64_t>(c1 + c2);
    overflow |= r2 != (static_cast<std::int64_t>(r1) >> 63) ? 1 : 0;
    acc.lo = r0;
    acc.hi = static_cast<std::int64_t>(r1);
  }

  // Carry-save accumulation of n <= L float values p[0..n): a_j[l] += the limb-j word of p[l]
  // (float_limb), bad[l] |= its overflow bit. Branch-free per value, so the lane loop vectorizes.
  template <int L>
  KOKKOS_INLINE_FUNCTION static void limb_accumulate(const float* p, int n, std::int64_t* a0, std::int64_t* a1,
                                                     std::int64_t* a2, std::int64_t* a3, std::int64_t* bad) {
    std::uint32_t bits[L];
    ::memcpy(bits, p, sizeof(std::uint32_t) * static_cast<std::size_t>(n));  // the floats' bit patterns
    for (int l = 0; l < n; ++l) {
      std::int64_t w, j, bd;
      float_limb(p[l], bits[l], w, j, bd);
      a0[l] += j == 0 ? w : 0;
      a1[l] += j == 1 ? w : 0;
      a2[l] += j == 2 ? w : 0;
      a3[l] += j == 3 ? w : 0;
      bad[l] |= bd;
    }
  }

  // from_double(v) for a float v, through the limb path (same bits, same overflow rule).
  KOKKOS_INLINE_FUNCTION static Fixed128 from_float(float v, int& overflow) {
    std::int64_t w, j, bad;
    float_limb(v, w, j, bad);
    if (bad) overflow = 1;
    std::int64_t a[kLimbs] = {0, 0, 0, 0};
    a[j] = w;
    Fixed128 r;
    int ov = 0;  // |w 2^(32 j)| < 2^126: cannot overflow
    add_limbs(r, a, ov);
    return r;
  }

  KOKKOS_INLINE_FUNCTION static std::uint64_t u(std::int64_t x) { return static_cast<std::uint64_t>(x); }

  // (w0,w1,w2) += (x0,x1,x2) mod 2^192.
  KOKKOS_INLINE_FUNCTION static void add192(std::uint64_t& w0, std::uint64_t& w1, std::uint64_t& w2, std::uint64_t x0,
                                            std::uint64_t x1, std::uint64_t x2) {
    const std::uint64_t s0 = w0 + x0;
    const std::uint64_t c0 = s0 < w0 ? 1u : 0u;
    const std::uint64_t t1 = w1 + x1;
    const std::uint64_t c1a = t1 < w1 ? 1u : 0u;
    const std::uint64_t s1 = t1 + c0;
    const std::uint64_t c1b = s1 < t1 ? 1u : 0u;
    w0 = s0;
    w1 = s1;
    w2 = w2 + x2 + c1a + c1b;
  }

  // The fixed-point value as a double (within an ulp; a function of the integer alone). The
  // magnitude is converted and the sign applied after, because hi * 2^64 + lo in doubles
  // cancels catastrophically for small negative values. Branch-free (the negation is masked), so
  // a loop over accumulators vectorizes; the operations are those of the former branchy form.
  KOKKOS_INLINE_FUNCTION static double to_double(const Fixed128& a) {
    const std::uint64_t m = u(a.hi >> 63);  // all ones when negative
    const std::uint64_t lo = (a.lo ^ m) + (m & 1u);
    const std::uint64_t hi = (u(a.hi) ^ m) + ((m & 1u) & (lo == 0 ? 1u : 0u));
    const double mag = static_cast<double>(hi) * 18446744073709551616.0 + static_cast<double>(lo);
    return (m != 0 ? -mag : mag) * 8.271806125530277e-25;  // 2^-80
  }
};

// A view of exact accumulators plus an overflow flag, one per parameter tensor.
using ExactView = Kokkos::View<Fixed128*, Kokkos::LayoutRight, MemSpace>;
using FlagView = Kokkos::View<int, MemSpace>;

}  // namespace minipipe
