// TEST-ONLY frozen copy of the deterministic exp/log/tanh of kernels/detmath.hpp as they were
// before the branch-free (vectorizable) rewrite. test_detmath_bits.cpp asserts that the
// production functions return exactly the bits of these reference functions. Do not edit:
// this file is the specification of the bits (docs/design.md §4 rule 3).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/types.hpp"

namespace minipipe {
namespace detref {
namespace detail {

// Bit layout and reduction constants of each floating-point type. The ln2 splits have trailing
// zero bits in kLn2Hi so that k * kLn2Hi is exact for every exponent k the functions can meet.
template <class T>
struct Traits;

template <>
struct Traits<double> {
  using Bits = std::uint64_t;
  static constexpr int kMantBits = 52;
  static constexpr int kBias = 1023;
  static constexpr double kLn2Hi = 0x1.62e42fee00000p-1;   // 32 significant bits
  static constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;  // ln2 - kLn2Hi, rounded
  static constexpr double kInvLn2 = 0x1.71547652b82fep+0;
  static constexpr double kRoundMagic = 0x1.8p52;  // x + 1.5*2^52 - 1.5*2^52 = rint(x)
  static constexpr double kExpMax = 709.79;        // exp overflows above (ln(DBL_MAX) = 709.7827)
  static constexpr double kExpMin = -745.2;        // exp is +0 below (ln(2^-1075) = -745.133)
  static constexpr double kMinNormal = 0x1p-1022;
  static constexpr double kSubnormalScale = 0x1p54;
  static constexpr int kSubnormalShift = 54;
  static constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;
  static constexpr double kTanhOne = 20.0;      // 1 - tanh(x) < 2^-54 beyond 19.07
  static constexpr double kTanhTiny = 0x1p-27;  // tanh(x) = x(1 - x^2/3): x^2/3 < 2^-55
};

template <>
struct Traits<float> {
  using Bits = std::uint32_t;
  static constexpr int kMantBits = 23;
  static constexpr int kBias = 127;
  static constexpr float kLn2Hi = 0x1.62e4p-1f;     // 16 significant bits
  static constexpr float kLn2Lo = 0x1.7f7d1cp-20f;  // ln2 - kLn2Hi, rounded
  static constexpr float kInvLn2 = 0x1.715476p+0f;
  static constexpr float kRoundMagic = 0x1.8p23f;
  static constexpr float kExpMax = 88.73f;   // ln(FLT_MAX) = 88.7228
  static constexpr float kExpMin = -104.0f;  // ln(2^-150) = -103.972
  static constexpr float kMinNormal = 0x1p-126f;
  static constexpr float kSubnormalScale = 0x1p25f;
  static constexpr int kSubnormalShift = 25;
  static constexpr float kSqrt2 = 0x1.6a09e6p+0f;
  static constexpr float kTanhOne = 10.0f;      // 1 - tanh(x) < 2^-25 beyond 9.02
  static constexpr float kTanhTiny = 0x1p-13f;  // x^2/3 < 2^-27
};

// Bit casts through memcpy: defined behaviour in C++17 and supported in device code by every
// Kokkos backend compiler (nvcc, hipcc, icpx).
template <class T>
KOKKOS_INLINE_FUNCTION typename Traits<T>::Bits to_bits(T x) {
  typename Traits<T>::Bits b;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}
template <class T>
KOKKOS_INLINE_FUNCTION T from_bits(typename Traits<T>::Bits b) {
  T x;
  std::memcpy(&x, &b, sizeof(T));
  return x;
}

template <class T>
KOKKOS_INLINE_FUNCTION T infinity() {
  using Bits = typename Traits<T>::Bits;
  return from_bits<T>(((Bits(1) << (8 * sizeof(T) - 1 - Traits<T>::kMantBits)) - 1) << Traits<T>::kMantBits);
}
template <class T>
KOKKOS_INLINE_FUNCTION T quiet_nan() {
  using Bits = typename Traits<T>::Bits;
  return from_bits<T>(to_bits(infinity<T>()) | (Bits(1) << (Traits<T>::kMantBits - 1)));
}

// 2^k for k in the normal exponent range, built from its bit pattern.
template <class T>
KOKKOS_INLINE_FUNCTION T pow2(int k) {
  using Bits = typename Traits<T>::Bits;
  return from_bits<T>(static_cast<Bits>(k + Traits<T>::kBias) << Traits<T>::kMantBits);
}

// v * 2^k with a single rounding, also when the result overflows or is subnormal: the first
// multiplication is exact, only the second can round. v is near 1 and |k| < 1200 here.
template <class T>
KOKKOS_INLINE_FUNCTION T scale2(T v, int k) {
  constexpr int kMaxExp = Traits<T>::kBias;
  constexpr int kMinExp = 1 - Traits<T>::kBias;
  constexpr int kShift = Traits<T>::kBias / 2 + 1;  // k + kShift normal for k >= kMinExp - kShift
  if (k > kMaxExp) return (v * pow2<T>(k - 1)) * T(2);
  if (k < kMinExp) return (v * pow2<T>(k + kShift)) * pow2<T>(-kShift);
  return v * pow2<T>(k);
}

// s + e = a + b exactly (Knuth), any magnitudes.
template <class T>
KOKKOS_INLINE_FUNCTION void two_sum(T a, T b, T& s, T& e) {
  s = a + b;
  const T bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}
// s + e = a + b exactly when |a| >= |b| (Dekker).
template <class T>
KOKKOS_INLINE_FUNCTION void fast_two_sum(T a, T b, T& s, T& e) {
  s = a + b;
  e = b - (s - a);
}

// (expm1(r) - r) / r^2 for |r| <= ln2/2 by its Taylor series 1/2! + r/3! + ... ; the first
// omitted term is below 2^-60 (double) / 2^-30 (float) relative to expm1(r).
KOKKOS_INLINE_FUNCTION double expm1_tail(double r) {
  double p = 1.0 / 87178291200.0;           // 1/14!
  p = fma_exact(p, r, 1.0 / 6227020800.0);  // 1/13!
  p = fma_exact(p, r, 1.0 / 479001600.0);   // 1/12!
  p = fma_exact(p, r, 1.0 / 39916800.0);
  p = fma_exact(p, r, 1.0 / 3628800.0);
  p = fma_exact(p, r, 1.0 / 362880.0);
  p = fma_exact(p, r, 1.0 / 40320.0);
  p = fma_exact(p, r, 1.0 / 5040.0);
  p = fma_exact(p, r, 1.0 / 720.0);
  p = fma_exact(p, r, 1.0 / 120.0);
  p = fma_exact(p, r, 1.0 / 24.0);
  p = fma_exact(p, r, 1.0 / 6.0);
  return fma_exact(p, r, 0.5);
}
KOKKOS_INLINE_FUNCTION float expm1_tail(float r) {
  float p = 1.0f / 40320.0f;  // 1/8!
  p = fma_exact(p, r, 1.0f / 5040.0f);
  p = fma_exact(p, r, 1.0f / 720.0f);
  p = fma_exact(p, r, 1.0f / 120.0f);
  p = fma_exact(p, r, 1.0f / 24.0f);
  p = fma_exact(p, r, 1.0f / 6.0f);
  return fma_exact(p, r, 0.5f);
}

// R(z) / z where log(1+f) = 2 atanh(s) = 2s + s*R, s = f/(2+f), z = s^2 <= 0.0295:
// 2/3 + 2/5 z + 2/7 z^2 + ... ; the first omitted term is below 2^-60 (double) / 2^-30 (float).
KOKKOS_INLINE_FUNCTION double log_series(double z) {
  double p = 2.0 / 21.0;
  p = fma_exact(p, z, 2.0 / 19.0);
  p = fma_exact(p, z, 2.0 / 17.0);
  p = fma_exact(p, z, 2.0 / 15.0);
  p = fma_exact(p, z, 2.0 / 13.0);
  p = fma_exact(p, z, 2.0 / 11.0);
  p = fma_exact(p, z, 2.0 / 9.0);
  p = fma_exact(p, z, 2.0 / 7.0);
  p = fma_exact(p, z, 2.0 / 5.0);
  return fma_exact(p, z, 2.0 / 3.0);
}
KOKKOS_INLINE_FUNCTION float log_series(float z) {
  float p = 2.0f / 11.0f;
  p = fma_exact(p, z, 2.0f / 9.0f);
  p = fma_exact(p, z, 2.0f / 7.0f);
  p = fma_exact(p, z, 2.0f / 5.0f);
  return fma_exact(p, z, 2.0f / 3.0f);
}

// Cody-Waite reduction x = k*ln2 + r + rl with |r| <= ~ln2/2 and r + rl exact to far below an
// ulp of r. rint through the magic constant is exact IEEE arithmetic; the explicit fma keeps k
// identical whether or not a compiler would have contracted x * (1/ln2) + magic.
template <class T>
KOKKOS_INLINE_FUNCTION int reduce_ln2(T x, T& r, T& rl) {
  using Tr = Traits<T>;
  const T kf = fma_exact(x, Tr::kInvLn2, Tr::kRoundMagic) - Tr::kRoundMagic;
  const T hi = x - kf * Tr::kLn2Hi;  // exact: kf*kLn2Hi is exact and close to x (Sterbenz)
  const T lo = kf * Tr::kLn2Lo;
  two_sum(hi, -lo, r, rl);
  return static_cast<int>(kf);
}

template <class T>
KOKKOS_INLINE_FUNCTION T exp_impl(T x) {
  using Tr = Traits<T>;
  if (!(x == x)) return x + x;  // NaN propagates
  if (x > Tr::kExpMax) return infinity<T>();
  if (x < Tr::kExpMin) return T(0);  // includes -inf (masked softmax logits)
  T r, rl;
  const int k = reduce_ln2(x, r, rl);
  const T t = (r * r) * expm1_tail(r);  // expm1(r) - r, small: its rounding barely matters
  // exp(r + rl) = 1 + r + t + rl*(1 + r + ...): keep 1 + r exact as a pair, round once at the end.
  T s, se;
  fast_two_sum(T(1), r, s, se);
  const T v = s + (se + (t + rl * s));
  return scale2(v, k);
}

// expm1(y) for 0 <= y <= 2*kTanhOne as an unevaluated pair h + l, accurate far below an ulp of h.
template <class T>
KOKKOS_INLINE_FUNCTION void expm1_pair_nonneg(T y, T& h, T& l) {
  T r, rl;
  const int k = reduce_ln2(y, r, rl);
  const T tail = (r * r) * expm1_tail(r) + rl * (T(1) + r);  // expm1(r + rl) - r
  if (k == 0) {
    fast_two_sum(r, tail, h, l);
    return;
  }
  const T e = pow2<T>(k);
  if (k <= Traits<T>::kMantBits + 1) {
    // 2^k (1 + r + tail) - 1 = (2^k - 1) + 2^k r + 2^k tail; the first two are exact numbers,
    // their sum is kept exact, so the cancellation near y = ln2/2 loses nothing.
    T s, se;
    two_sum(e - T(1), e * r, s, se);
    fast_two_sum(s, se + e * tail, h, l);
    return;
  }
  // 2^k > 2^(mant+1): the -1 only touches the low part.
  T s, se;
  fast_two_sum(T(1), r, s, se);
  h = e * s;
  l = e * (se + tail) - T(1);
}

template <class T>
KOKKOS_INLINE_FUNCTION T log_impl(T x) {
  using Tr = Traits<T>;
  using Bits = typename Tr::Bits;
  if (!(x == x)) return x + x;
  if (x < T(0)) return quiet_nan<T>();
  if (x == T(0)) return -infinity<T>();
  if (x == infinity<T>()) return x;
  int k = 0;
  if (x < Tr::kMinNormal) {  // subnormal: make it normal first (exact scaling)
    x *= Tr::kSubnormalScale;
    k = -Tr::kSubnormalShift;
  }
  const Bits b = to_bits(x);
  const Bits mant_mask = (Bits(1) << Tr::kMantBits) - 1;
  k += static_cast<int>(b >> Tr::kMantBits) - Tr::kBias;
  T m = from_bits<T>((b & mant_mask) | (static_cast<Bits>(Tr::kBias) << Tr::kMantBits));  // [1,2)
  if (m > Tr::kSqrt2) {  // centre the mantissa on 1: m in [sqrt(2)/2, sqrt(2)]
    m *= T(0.5);
    ++k;
  }
  const T f = m - T(1);  // exact (Sterbenz)
  const T s = f / (T(2) + f);
  const T z = s * s;
  const T R = z * log_series(z);
  const T hfsq = T(0.5) * f * f;
  // log(1+f) = f - hfsq + s*(hfsq + R): f is exact and hfsq the next largest term, so the
  // rounding errors of the small remainder hardly show in the result.
  if (k == 0) return f - (hfsq - s * (hfsq + R));
  const T kf = static_cast<T>(k);
  return kf * Tr::kLn2Hi - ((hfsq - (s * (hfsq + R) + kf * Tr::kLn2Lo)) - f);
}

template <class T>
KOKKOS_INLINE_FUNCTION T tanh_impl(T x) {
  using Tr = Traits<T>;
  if (!(x == x)) return x + x;
  const T ax = x < T(0) ? -x : x;
  if (ax > Tr::kTanhOne) return x < T(0) ? T(-1) : T(1);
  if (ax < Tr::kTanhTiny) return x;  // also keeps the sign of -0
  // tanh(a) = E / (E + 2) with E = expm1(2a) as a pair; the division is corrected with its exact
  // remainder (fma), so the only visible rounding is the final one.
  T eh, el;
  expm1_pair_nonneg(ax + ax, eh, el);
  T dh, dl;
  two_sum(eh, T(2), dh, dl);
  dl += el;
  const T q = eh / dh;
  const T rem = (fma_exact(-q, dh, eh) + el) - q * dl;  // (eh + el) - q*(dh + dl)
  const T th = q + rem / dh;
  return x < T(0) ? -th : th;
}

}  // namespace detail

KOKKOS_INLINE_FUNCTION float exp(float x) {
  return detail::exp_impl(x);
}
KOKKOS_INLINE_FUNCTION double exp(double x) {
  return detail::exp_impl(x);
}
KOKKOS_INLINE_FUNCTION float log(float x) {
  return detail::log_impl(x);
}
KOKKOS_INLINE_FUNCTION double log(double x) {
  return detail::log_impl(x);
}
KOKKOS_INLINE_FUNCTION float tanh(float x) {
  return detail::tanh_impl(x);
}
KOKKOS_INLINE_FUNCTION double tanh(double x) {
  return detail::tanh_impl(x);
}

}  // namespace detref

}  // namespace minipipe
