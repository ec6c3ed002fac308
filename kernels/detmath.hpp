// Deterministic exp, log and tanh for float and double, built only from IEEE-exact operations
// (+ - * /, fma, exact power-of-two scaling), so every backend returns the same bits (docs/design.md §4.3).
#pragma once

#include <cstdint>
#include <cstring>

#include "types.hpp"

namespace minipipe {
namespace det {
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

// Bit casts. Kokkos 4.1+ has Kokkos::bit_cast, which every backend compiler accepts in device
// code (clang's HIP rejects std::memcpy inside a device function). Kokkos 3.x builds are host
// backends only, where a std::memcpy cast is defined behaviour in C++17 and compiles to a move.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION typename Traits<T>::Bits to_bits(T x) {
#if KOKKOS_VERSION >= 40100
  return Kokkos::bit_cast<typename Traits<T>::Bits>(x);
#else
  typename Traits<T>::Bits b;
  std::memcpy(&b, &x, sizeof(T));
  return b;
#endif
}
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T from_bits(typename Traits<T>::Bits b) {
#if KOKKOS_VERSION >= 40100
  return Kokkos::bit_cast<T>(b);
#else
  T x;
  std::memcpy(&x, &b, sizeof(T));
  return x;
#endif
}

// Branch-free selection through bit masks: c ? a : b. Both a and b are always computed, so the
// compiler has no conditional floating-point operation to keep behind a branch (with the default
// -ftrapping-math GCC will not if-convert those, and then does not vectorize the loop).
template <class T>
KOKKOS_FORCEINLINE_FUNCTION typename Traits<T>::Bits mask(bool c) {
  using Bits = typename Traits<T>::Bits;
  return Bits(0) - static_cast<Bits>(c);
}
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T select(bool c, T a, T b) {
  const typename Traits<T>::Bits m = mask<T>(c);
  return from_bits<T>((to_bits(a) & m) | (to_bits(b) & ~m));
}

template <class T>
KOKKOS_FORCEINLINE_FUNCTION T infinity() {
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
KOKKOS_FORCEINLINE_FUNCTION T pow2(int k) {
  using Bits = typename Traits<T>::Bits;
  return from_bits<T>(static_cast<Bits>(k + Traits<T>::kBias) << Traits<T>::kMantBits);
}

// s + e = a + b exactly (Knuth), any magnitudes.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION void two_sum(T a, T b, T& s, T& e) {
  s = a + b;
  const T bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}
// s + e = a + b exactly when |a| >= |b| (Dekker).
template <class T>
KOKKOS_FORCEINLINE_FUNCTION void fast_two_sum(T a, T b, T& s, T& e) {
  s = a + b;
  e = b - (s - a);
}

// (expm1(r) - r) / r^2 for |r| <= ln2/2 by its Taylor series 1/2! + r/3! + ... ; the first
// omitted term is below 2^-60 (double) / 2^-30 (float) relative to expm1(r).
KOKKOS_FORCEINLINE_FUNCTION double expm1_tail(double r) {
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
KOKKOS_FORCEINLINE_FUNCTION float expm1_tail(float r) {
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
// identical whether or not a compiler would have contracted x * (1/ln2) + magic. k is returned
// both as a floating-point integer kf and as kb, its two's complement in the bit type: the rounded
// sum t = magic + k lies in the binade of magic whose ulp is 1, so bits(t) - bits(magic) = k.
// Everything stays in one lane width, so loops over these functions vectorize.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION void reduce_ln2(T x, T& r, T& rl, T& kf, typename Traits<T>::Bits& kb) {
  using Tr = Traits<T>;
  const T t = fma_exact(x, Tr::kInvLn2, Tr::kRoundMagic);
  kf = t - Tr::kRoundMagic;
  kb = to_bits(t) - to_bits(Tr::kRoundMagic);
  const T hi = x - kf * Tr::kLn2Hi;  // exact: kf*kLn2Hi is exact and close to x (Sterbenz)
  const T lo = kf * Tr::kLn2Lo;
  two_sum(hi, -lo, r, rl);
}

// 2^k from k as two's complement bits, for k in the normal exponent range.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T pow2_bits(typename Traits<T>::Bits kb) {
  using Bits = typename Traits<T>::Bits;
  return from_bits<T>((kb + static_cast<Bits>(Traits<T>::kBias)) << Traits<T>::kMantBits);
}

// v * 2^k with a single rounding, also when the result overflows or is subnormal: the first
// multiplication is exact, only the second can round. v is near 1 and |k| < 1200 here.
// Branch-free: the exponent split is selected, and the unsplit case multiplies by exactly 1.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T scale2(T v, T kf, typename Traits<T>::Bits kb) {
  using Bits = typename Traits<T>::Bits;
  constexpr int kMaxExp = Traits<T>::kBias;
  constexpr int kMinExp = 1 - Traits<T>::kBias;
  constexpr int kShift = Traits<T>::kBias / 2 + 1;  // k + kShift normal for k >= kMinExp - kShift
  const bool over = kf > T(kMaxExp);
  const bool under = kf < T(kMinExp);
  const Bits k1 = kb + (mask<T>(over) & static_cast<Bits>(-1)) + (mask<T>(under) & static_cast<Bits>(kShift));
  const T f2 = select(over, T(2), select(under, pow2<T>(-kShift), T(1)));
  return (v * pow2_bits<T>(k1)) * f2;
}

// Branch-free so that loops over it vectorize: out-of-range inputs are replaced by 0 for the
// main computation and their results are selected at the end.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T exp_impl(T x) {
  using Tr = Traits<T>;
  const bool in_range = (x >= Tr::kExpMin) & (x <= Tr::kExpMax);  // false for NaN
  const T xc = select(in_range, x, T(0));
  T r, rl, kf;
  typename Tr::Bits kb;
  reduce_ln2(xc, r, rl, kf, kb);
  const T t = (r * r) * expm1_tail(r);  // expm1(r) - r, small: its rounding barely matters
  // exp(r + rl) = 1 + r + t + rl*(1 + r + ...): keep 1 + r exact as a pair, round once at the end.
  T s, se;
  fast_two_sum(T(1), r, s, se);
  const T v = s + (se + (t + rl * s));
  const T nan_res = x + x;  // NaN propagates
  T res = scale2(v, kf, kb);
  res = select(x > Tr::kExpMax, infinity<T>(), res);
  res = select(x < Tr::kExpMin, T(0), res);  // includes -inf (masked softmax logits)
  return select(x == x, res, nan_res);
}

// expm1(y) for 0 <= y <= 2*kTanhOne as an unevaluated pair h + l, accurate far below an ulp of h.
// The three cases of the reduction index k are all evaluated and the right one selected.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION void expm1_pair_nonneg(T y, T& h, T& l) {
  T r, rl, kf;
  typename Traits<T>::Bits kb;
  reduce_ln2(y, r, rl, kf, kb);
  const T tail = (r * r) * expm1_tail(r) + rl * (T(1) + r);  // expm1(r + rl) - r
  // k == 0.
  T h0, l0;
  fast_two_sum(r, tail, h0, l0);
  const T e = pow2_bits<T>(kb);
  // 0 < k <= mant+1: 2^k (1 + r + tail) - 1 = (2^k - 1) + 2^k r + 2^k tail; the first two are
  // exact numbers, their sum is kept exact, so the cancellation near y = ln2/2 loses nothing.
  T s1, se1, h1, l1;
  two_sum(e - T(1), e * r, s1, se1);
  fast_two_sum(s1, se1 + e * tail, h1, l1);
  // 2^k > 2^(mant+1): the -1 only touches the low part.
  T s2, se2;
  fast_two_sum(T(1), r, s2, se2);
  const T h2 = e * s2;
  const T l2 = e * (se2 + tail) - T(1);
  const bool k0 = kf == T(0);
  const bool mid = kf <= T(Traits<T>::kMantBits + 1);
  h = select(k0, h0, select(mid, h1, h2));
  l = select(k0, l0, select(mid, l1, l2));
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

// Branch-free so that loops over it vectorize: |x| outside [kTanhTiny, kTanhOne] (and NaN) is
// replaced by 1 for the main computation, and those results are selected at the end.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T tanh_impl(T x) {
  using Tr = Traits<T>;
  const bool neg = x < T(0);
  const T ax = select(neg, -x, x);
  const bool mid_range = (ax >= Tr::kTanhTiny) & (ax <= Tr::kTanhOne);  // false for NaN
  const T a = select(mid_range, ax, T(1));
  // tanh(a) = E / (E + 2) with E = expm1(2a) as a pair; the division is corrected with its exact
  // remainder (fma), so the only visible rounding is the final one.
  T eh, el;
  expm1_pair_nonneg(a + a, eh, el);
  T dh, dl;
  two_sum(eh, T(2), dh, dl);
  dl += el;
  const T q = eh / dh;
  const T rem = (fma_exact(-q, dh, eh) + el) - q * dl;  // (eh + el) - q*(dh + dl)
  const T th = q + rem / dh;
  const T nan_res = x + x;
  T res = select(neg, -th, th);
  res = select(ax > Tr::kTanhOne, select(neg, T(-1), T(1)), res);
  res = select(ax < Tr::kTanhTiny, x, res);  // also keeps the sign of -0
  return select(x == x, res, nan_res);
}

}  // namespace detail

KOKKOS_FORCEINLINE_FUNCTION float exp(float x) {
  return detail::exp_impl(x);
}
KOKKOS_FORCEINLINE_FUNCTION double exp(double x) {
  return detail::exp_impl(x);
}
KOKKOS_INLINE_FUNCTION float log(float x) {
  return detail::log_impl(x);
}
KOKKOS_INLINE_FUNCTION double log(double x) {
  return detail::log_impl(x);
}
KOKKOS_FORCEINLINE_FUNCTION float tanh(float x) {
  return detail::tanh_impl(x);
}
KOKKOS_FORCEINLINE_FUNCTION double tanh(double x) {
  return detail::tanh_impl(x);
}

// det::exp(x) for x in [kLo, kHi] of ExpNormal (exp_normal_range): there k = rint(x / ln2) lies
// within the normal exponents, with a margin over the rounding of x / ln2, and the steps below are
// exactly exp_impl's without its range selects and split scaling (more than half of its cost on the
// host), so the value is det::exp(x) bit for bit (test_detmath_bits checks). Outside the range the
// value is meaningless: a caller tests the range (one compare pass) and calls det::exp where it
// fails.
template <class T>
struct ExpNormal;
template <>
struct ExpNormal<float> {
  static constexpr float kLo = -87.0f, kHi = 88.0f;  // k in [-126, 127] from -87.68 to 88.38
};
template <>
struct ExpNormal<double> {
  static constexpr double kLo = -708.0, kHi = 709.0;  // k in [-1022, 1023] from -708.74 to 709.43
};
template <class T>
KOKKOS_FORCEINLINE_FUNCTION bool exp_normal_range(T x) {
  return (x >= ExpNormal<T>::kLo) & (x <= ExpNormal<T>::kHi);  // false for NaN
}
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T exp_normal(T x) {
  T r, rl, kf;
  typename detail::Traits<T>::Bits kb;
  detail::reduce_ln2(x, r, rl, kf, kb);
  const T t = (r * r) * detail::expm1_tail(r);
  T s, se;
  detail::fast_two_sum(T(1), r, s, se);
  const T v = s + (se + (t + rl * s));
  return v * detail::pow2_bits<T>(kb);
}

// A coarser exp of a float in exp_normal_range, for fast mode: k = rint(x / ln2) from the rounded
// product, r = x - k ln2 in two fused steps (ln2 split so that k times its head is exact), e^r by
// its Taylor polynomial to r^7 (|r| <= ln2/2: truncation below 2^-26 relative), then p 2^k with
// one rounding. About an ulp from det::exp at a third of exp_normal's operations; still IEEE-exact
// operations only, so every backend forms the same bits. The host attention's AVX-512 softmax runs
// the same steps in intrinsics (host_simd.hpp, exp_fast16: roundscale and scalef are this rint and
// this p 2^k). Double has no coarse form: it is det::exp_normal.
KOKKOS_FORCEINLINE_FUNCTION float exp_coarse(float x) {
  using Tr = detail::Traits<float>;
  const float t = x * Tr::kInvLn2 + Tr::kRoundMagic;
  const float kf = t - Tr::kRoundMagic;
  const Tr::Bits kb = detail::to_bits(t) - detail::to_bits(Tr::kRoundMagic);
  float r = fma_exact(-kf, 0x1.62e430p-1f, x);
  r = fma_exact(-kf, -0x1.05c610p-29f, r);
  float p = 1.0f / 5040.0f;
  p = fma_exact(p, r, 1.0f / 720.0f);
  p = fma_exact(p, r, 1.0f / 120.0f);
  p = fma_exact(p, r, 1.0f / 24.0f);
  p = fma_exact(p, r, 1.0f / 6.0f);
  p = fma_exact(p, r, 0.5f);
  p = fma_exact(p, r, 1.0f);
  p = fma_exact(p, r, 1.0f);
  return p * detail::pow2_bits<float>(kb);
}
KOKKOS_FORCEINLINE_FUNCTION double exp_coarse(double x) {
  return exp_normal(x);
}

// y[i] = det::exp(arg(i)) for i < n, bit for bit (y may be the array that arg reads): det::exp_normal
// when one compare pass finds every arg(i) in its range, else det::exp. Whole blocks of one 512-bit
// vector, so no scalar exp runs (one costs as much as a vector): up to n_pad when the caller has room
// there (n_pad >= n a multiple of the block; y[n..n_pad) then holds values the caller must not use,
// and arg(i) must be readable), else the last partial block is padded with zeros.
// arg is evaluated once per pass (it is an element, or an element minus a shift). in_range: -1 runs
// the compare pass; 1 says the caller knows that every arg(i), i < n, is in exp_normal_range (0 that
// one may not be), so the pass is skipped. kCoarse: det::exp_coarse instead of det::exp_normal where
// every arg is in range (fast mode; det::exp elsewhere, as without it).
template <class T, bool kCoarse = false, class Arg>
KOKKOS_FORCEINLINE_FUNCTION void exp_array_of(const Arg& arg, T* y, int n, int n_pad, int in_range = -1) {
  constexpr int E = int(64 / sizeof(T));
  int normal = in_range;
  if (normal < 0) {
    normal = 1;
    for (int i = 0; i < n; ++i) normal &= static_cast<int>(exp_normal_range(arg(i)));
  }
  const int whole = n_pad >= n ? n_pad : n / E * E;  // blocks computed whole
  int c0 = 0;
  auto in_range_exp = [](T x) { return kCoarse ? exp_coarse(x) : exp_normal(x); };
  if (normal) {
    for (; c0 + E <= whole; c0 += E)
      for (int l = 0; l < E; ++l) y[c0 + l] = in_range_exp(arg(c0 + l));
  } else {
    for (; c0 + E <= whole; c0 += E)
      for (int l = 0; l < E; ++l) y[c0 + l] = exp(arg(c0 + l));
  }
  if (c0 >= n) return;
  T e[E];
  for (int l = 0; l < E; ++l) e[l] = c0 + l < n ? arg(c0 + l) : T(0);
  if (normal)
    for (int l = 0; l < E; ++l) e[l] = in_range_exp(e[l]);
  else
    for (int l = 0; l < E; ++l) e[l] = exp(e[l]);
  for (int l = 0; l < E; ++l)
    if (c0 + l < n) y[c0 + l] = e[l];
}

// y[i] = det::exp(x[i]) for i < n (y may be x).
template <class T>
KOKKOS_FORCEINLINE_FUNCTION void exp_array(const T* x, T* y, int n) {
  exp_array_of<T>([&](const int i) { return x[i]; }, y, n, 0);
}

// y[i] = det::exp(x[i] - s) for i < n (y may be x): a softmax row's exps without a pass that
// stores x - s first; n_pad and in_range as exp_array_of's.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION void exp_array(const T* x, T s, T* y, int n, int n_pad, int in_range = -1) {
  exp_array_of<T>([&](const int i) { return x[i] - s; }, y, n, n_pad, in_range);
}

}  // namespace det

// The elementary function a kernel uses in mode `fast` (libm through Kokkos) or not (det::).
// `fast` is uniform across a kernel launch, so the branch costs nothing on GPUs.
template <class T>
KOKKOS_INLINE_FUNCTION T mode_exp(bool fast, T x) {
  return fast ? kmath::exp(x) : det::exp(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T mode_log(bool fast, T x) {
  return fast ? kmath::log(x) : det::log(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T mode_tanh(bool fast, T x) {
  return fast ? kmath::tanh(x) : det::tanh(x);
}

}  // namespace minipipe
