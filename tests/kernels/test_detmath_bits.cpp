// Bitwise equality of the production deterministic exp/log/tanh (kernels/detmath.hpp) and of the
// GELU kernels with the frozen reference implementation (detmath_reference.hpp): the branch-free
// vectorizable rewrite must not change a single result bit (docs/design.md §4 rule 3). Inputs: random
// bit patterns over the whole range, dense sweeps around every special point (0, subnormals,
// exp overflow/underflow thresholds, tanh saturation and small-argument cut-offs, reduction
// boundaries, inf, NaN), and a strided walk over every float. Set MINIPIPE_DETMATH_EXHAUSTIVE=1
// to check all 2^32 floats instead of the strided walk (minutes). Timing lives in
// benchmarks/ (a test that asserts nothing cannot fail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "detmath_reference.hpp"
#include "kernels/detmath.hpp"
#include "kernels/gelu.hpp"
#include "kernels/host_simd.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

template <class T>
struct BitsOf;
template <>
struct BitsOf<float> {
  using type = std::uint32_t;
};
template <>
struct BitsOf<double> {
  using type = std::uint64_t;
};

template <class T>
typename BitsOf<T>::type bits(T x) {
  typename BitsOf<T>::type b;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}
template <class T>
T of_bits(typename BitsOf<T>::type b) {
  T x;
  std::memcpy(&x, &b, sizeof(T));
  return x;
}

enum class Fn { exp, log, tanh };
const char* name(Fn f) {
  return f == Fn::exp ? "exp" : f == Fn::log ? "log" : "tanh";
}

// The production functions over an array: a plain loop the compiler may vectorize, so both the
// scalar and the SIMD code paths of the production functions are what gets compared.
template <class T>
void eval_new(Fn f, const T* __restrict x, T* __restrict y, std::size_t n) {
  switch (f) {
    case Fn::exp:
      for (std::size_t i = 0; i < n; ++i) y[i] = det::exp(x[i]);
      break;
    case Fn::log:
      for (std::size_t i = 0; i < n; ++i) y[i] = det::log(x[i]);
      break;
    case Fn::tanh:
      for (std::size_t i = 0; i < n; ++i) y[i] = det::tanh(x[i]);
      break;
  }
}
template <class T>
void eval_ref(Fn f, const T* __restrict x, T* __restrict y, std::size_t n) {
  switch (f) {
    case Fn::exp:
      for (std::size_t i = 0; i < n; ++i) y[i] = detref::exp(x[i]);
      break;
    case Fn::log:
      for (std::size_t i = 0; i < n; ++i) y[i] = detref::log(x[i]);
      break;
    case Fn::tanh:
      for (std::size_t i = 0; i < n; ++i) y[i] = detref::tanh(x[i]);
      break;
  }
}

// Compares new vs reference on every x; returns the number of mismatches (first few printed).
template <class T>
std::size_t compare(Fn f, const std::vector<T>& x, const char* what) {
  std::vector<T> a(x.size()), b(x.size());
  eval_new(f, x.data(), a.data(), x.size());
  eval_ref(f, x.data(), b.data(), x.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Also the scalar call on a single element (different code path from the loop above).
    const T s = f == Fn::exp ? det::exp(x[i]) : f == Fn::log ? det::log(x[i]) : det::tanh(x[i]);
    if (bits(a[i]) != bits(b[i]) || (i % 64 == 0 && bits(s) != bits(b[i]))) {
      if (bad < 8)
        std::printf("  %s %s(%s) x=%a new=%a ref=%a\n", what, name(f), sizeof(T) == 4 ? "float" : "double",
                    static_cast<double>(x[i]), static_cast<double>(a[i]), static_cast<double>(b[i]));
      ++bad;
    }
  }
  return bad;
}

// n consecutive representable values on each side of p (the bit patterns around it, moving
// away from and towards zero), plus p itself.
template <class T>
void add_sweep(std::vector<T>& v, T p, int n) {
  using B = typename BitsOf<T>::type;
  const B b = bits(p);
  for (int i = -n; i <= n; ++i) {
    const B c = b + static_cast<B>(static_cast<std::int64_t>(i));
    const T x = of_bits<T>(c);
    v.push_back(x);
    v.push_back(-x);
  }
}

// Special points of exp/log/tanh for type T.
template <class T>
std::vector<T> special_inputs(int n) {
  using L = std::numeric_limits<T>;
  using Tr = det::detail::Traits<T>;
  std::vector<T> v;
  const T ln2 = static_cast<T>(0.693147180559945309417232121458176568L);
  const T pts[] = {T(0),
                   L::denorm_min(),
                   L::min(),
                   L::max(),
                   L::epsilon(),
                   T(1),
                   T(2),
                   T(0.5),
                   ln2,
                   ln2 / T(2),
                   T(3) * ln2 / T(2),
                   Tr::kSqrt2,
                   Tr::kSqrt2 / T(2),
                   Tr::kExpMax,
                   Tr::kExpMin,
                   static_cast<T>(std::log(static_cast<long double>(L::max()))),
                   static_cast<T>(std::log(static_cast<long double>(L::min()))),
                   static_cast<T>(std::log(static_cast<long double>(L::denorm_min()))),
                   static_cast<T>(std::log(static_cast<long double>(L::denorm_min()) / 2)),
                   Tr::kTanhOne,
                   Tr::kTanhTiny,
                   Tr::kTanhOne / T(2),
                   Tr::kTanhTiny * T(2),
                   static_cast<T>((Tr::kMantBits + 1.5) * 0.693147180559945309417232121458176568L / 2),
                   static_cast<T>((Tr::kMantBits + 0.5) * 0.693147180559945309417232121458176568L / 2),
                   static_cast<T>(0.25 * 0.693147180559945309417232121458176568L),
                   L::infinity()};
  for (T p : pts) add_sweep(v, p, n);
  // Every reduction boundary x = (j + 1/2) ln2 of exp over its whole range, and of tanh (2x).
  for (int j = -1100; j <= 1100; ++j) {
    const T p = static_cast<T>((j + 0.5L) * 0.693147180559945309417232121458176568L);
    if (std::isfinite(p) && p < Tr::kExpMax * 2 && p > Tr::kExpMin * 2) {
      add_sweep(v, p, 16);
      add_sweep(v, p / T(2), 16);
    }
  }
  // NaNs: quiet and signalling, several payloads, both signs.
  using B = typename BitsOf<T>::type;
  const B inf = bits(L::infinity());
  const B sign = B(1) << (8 * sizeof(T) - 1);
  const B quiet = B(1) << (Tr::kMantBits - 1);
  for (B payload : {B(1), B(2), B(12345), quiet, quiet | B(1), quiet | B(77), (B(1) << Tr::kMantBits) - 1}) {
    v.push_back(of_bits<T>(inf | payload));
    v.push_back(of_bits<T>(inf | payload | sign));
  }
  v.push_back(L::quiet_NaN());
  v.push_back(-L::quiet_NaN());
  return v;
}

constexpr Fn kFns[] = {Fn::exp, Fn::log, Fn::tanh};

TEST(DetmathBits, FloatRandomBitPatterns) {
  std::mt19937 rng(20240611);
  std::vector<float> x(1 << 24);  // 16.8M random bit patterns: every exponent, sign, NaN
  for (auto& v : x) v = of_bits<float>(static_cast<std::uint32_t>(rng()));
  for (Fn f : kFns) EXPECT_EQ(compare(f, x, "random bits"), 0u) << name(f);
}

TEST(DetmathBits, FloatRandomInRange) {
  std::mt19937_64 rng(77);
  std::vector<float> x(1 << 23);
  std::uniform_real_distribution<double> wide(-110.0, 110.0), narrow(-12.0, 12.0), tiny(-30.0, 4.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int which = static_cast<int>(i % 3);
    double d = which == 0 ? wide(rng) : which == 1 ? narrow(rng) : std::exp2(tiny(rng));
    if (which == 2 && (rng() & 1)) d = -d;
    x[i] = static_cast<float>(d);
  }
  for (Fn f : kFns) EXPECT_EQ(compare(f, x, "random in range"), 0u) << name(f);
}

TEST(DetmathBits, FloatSpecialSweeps) {
  const auto x = special_inputs<float>(4096);
  for (Fn f : kFns) EXPECT_EQ(compare(f, x, "sweep"), 0u) << name(f);
}

// Every float with stride (all 2^32 with MINIPIPE_DETMATH_EXHAUSTIVE=1), in chunks.
TEST(DetmathBits, FloatStridedAllBitPatterns) {
  const char* env = std::getenv("MINIPIPE_DETMATH_EXHAUSTIVE");
  const bool all = env != nullptr && env[0] == '1';
  const std::uint64_t stride = all ? 1 : 61;  // odd prime: hits every mantissa residue class
  const std::size_t chunk = 1 << 22;
  std::vector<float> x;
  x.reserve(chunk);
  std::size_t bad[3] = {0, 0, 0};
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += stride) {
    x.push_back(of_bits<float>(static_cast<std::uint32_t>(b)));
    if (x.size() == chunk || b + stride >= (std::uint64_t(1) << 32)) {
      for (int k = 0; k < 3; ++k) bad[k] += compare(kFns[k], x, all ? "exhaustive" : "strided");
      x.clear();
    }
  }
  for (int k = 0; k < 3; ++k) EXPECT_EQ(bad[k], 0u) << name(kFns[k]);
}

// Every float in the non-trivial ranges of tanh (|x| in [2^-14, 16]) and exp ([-128, 128] with
// |x| >= 2^-8, where the reduction index is non-zero), both signs: exhaustive.
TEST(DetmathBits, FloatExhaustiveMainRanges) {
  const std::size_t chunk = 1 << 22;
  std::vector<float> x;
  x.reserve(chunk);
  auto run = [&](Fn f, float lo, float hi) {
    std::size_t bad = 0;
    for (std::uint32_t b = bits(lo); b <= bits(hi); ++b) {
      x.push_back(of_bits<float>(b));
      x.push_back(-of_bits<float>(b));
      if (x.size() >= chunk || b == bits(hi)) {
        bad += compare(f, x, "exhaustive range");
        x.clear();
      }
    }
    return bad;
  };
  EXPECT_EQ(run(Fn::tanh, 0x1p-14f, 16.0f), 0u);
  EXPECT_EQ(run(Fn::exp, 0x1p-8f, 128.0f), 0u);
}

// det::exp_normal is det::exp without its range handling, for arguments in exp_normal_range: there
// its bits must be the reference exp's, and the range must be one where that holds right up to its
// ends, with a margin (the 2^14 floats past each end still match, though callers never use them).
// Floats: every 7th bit pattern over the range, every one within 2^20 patterns of its ends.
// Double: random arguments in the range and the doubles next to its ends.
template <class T>
std::size_t exp_normal_mismatches(const std::vector<T>& x, const char* what) {
  std::vector<T> a(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) a[i] = det::exp_normal(x[i]);  // a loop that vectorizes
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const T ref = detref::exp(x[i]);
    if (bits(a[i]) != bits(ref) && bad++ < 8)
      std::printf("  %s exp_normal x=%a got=%a ref=%a\n", what, static_cast<double>(x[i]), static_cast<double>(a[i]),
                  static_cast<double>(ref));
  }
  return bad;
}

TEST(DetmathBits, FloatExpNormalOverItsRange) {
  using R = det::ExpNormal<float>;
  EXPECT_TRUE(det::exp_normal_range(R::kLo) && det::exp_normal_range(R::kHi));
  EXPECT_FALSE(det::exp_normal_range(std::nextafter(R::kLo, -1000.0f)) ||
               det::exp_normal_range(std::nextafter(R::kHi, 1000.0f)) ||
               det::exp_normal_range(std::numeric_limits<float>::quiet_NaN()));
  const std::size_t chunk = 1 << 22;
  std::vector<float> x;
  x.reserve(chunk);
  std::size_t bad = 0;
  // Bit patterns b0..b1 of one sign (magnitudes grow with the pattern), with the given stride.
  auto walk = [&](std::uint32_t b0, std::uint32_t b1, std::uint32_t stride, const char* what) {
    for (std::uint32_t b = b0; b <= b1; b += stride) {
      x.push_back(of_bits<float>(b));
      if (x.size() == chunk || b1 - b < stride) {
        bad += exp_normal_mismatches(x, what);
        x.clear();
      }
    }
  };
  for (const float end : {R::kLo, R::kHi}) {
    const std::uint32_t e = bits(end), zero = bits(std::copysign(0.0f, end));
    walk(zero, e, 7, "strided");
    walk(e - (1u << 20), e + (1u << 14), 1, "near an end");
  }
  EXPECT_EQ(bad, 0u);
}

// The host softmax's 16-lane exps (host_simd.hpp) against their per-float definitions on every
// float of exp_normal_range (2.2e9): exp_normal16 must give det::exp_normal's bits (checked above
// against the reference), exp_fast16 det::exp_coarse's. exp_normal16 takes fewer steps than
// det::exp_normal, so only a walk over every float can show it equal (a few seconds).
TEST(DetmathBits, FloatExp16LanesOverTheRange) {
#ifdef MINIPIPE_HOST_AVX512
  using R = det::ExpNormal<float>;
  const std::size_t chunk = std::size_t(1) << 22;
  std::vector<float> x(chunk), normal(chunk), coarse(chunk);
  std::size_t bad_normal = 0, bad_coarse = 0, n = 0;
  for (const float end : {R::kLo, R::kHi}) {
    const std::uint32_t b1 = bits(end);
    for (std::uint64_t b0 = bits(std::copysign(0.0f, end)); b0 <= b1; b0 += chunk) {
      const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, b1 - b0 + 1));
      for (std::size_t i = 0; i < m; ++i) x[i] = of_bits<float>(static_cast<std::uint32_t>(b0 + i));
      for (std::size_t i = 0; i < m; ++i) normal[i] = det::exp_normal(x[i]);  // loops that vectorize
      for (std::size_t i = 0; i < m; ++i) coarse[i] = det::exp_coarse(x[i]);
      for (std::size_t i = 0; i < m; i += 16) {
        const auto lanes = static_cast<__mmask16>(m - i >= 16 ? 0xFFFFu : (1u << (m - i)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(lanes, x.data() + i);
        const __m512 en = host_simd::exp_normal16(v), ec = host_simd::exp_fast16(v);
        const __m512i rn = _mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, normal.data() + i));
        const __m512i rc = _mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, coarse.data() + i));
        const __mmask16 dn = _mm512_mask_cmpneq_epi32_mask(lanes, _mm512_castps_si512(en), rn);
        const __mmask16 dc = _mm512_mask_cmpneq_epi32_mask(lanes, _mm512_castps_si512(ec), rc);
        if (dn == 0 && dc == 0) continue;
        alignas(64) float gn[16], gc[16];
        _mm512_store_ps(gn, en);
        _mm512_store_ps(gc, ec);
        for (int l = 0; l < 16; ++l) {
          if (((dn >> l) & 1) && bad_normal++ < 8)
            std::printf("  exp_normal16 x=%a got=%a ref=%a\n", static_cast<double>(x[i + l]),
                        static_cast<double>(gn[l]), static_cast<double>(normal[i + l]));
          if (((dc >> l) & 1) && bad_coarse++ < 8)
            std::printf("  exp_fast16 x=%a got=%a ref=%a\n", static_cast<double>(x[i + l]), static_cast<double>(gc[l]),
                        static_cast<double>(coarse[i + l]));
        }
      }
      n += m;
    }
  }
  EXPECT_GT(n, std::size_t(2000000000));  // every float of [-87, 88]: 2.24e9
  EXPECT_EQ(bad_normal, 0u);
  EXPECT_EQ(bad_coarse, 0u);
#else
  GTEST_SKIP() << "a build without AVX-512F compiles no 16-lane exps";
#endif
}

TEST(DetmathBits, DoubleExpNormalOverItsRange) {
  using R = det::ExpNormal<double>;
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> all(R::kLo, R::kHi), small(-2.0, 2.0);
  std::vector<double> x(1 << 22);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? all(rng) : small(rng);
  for (const double end : {R::kLo, R::kHi}) {
    double v = end;
    for (int k = 0; k < 4096; ++k) {  // the 4096 doubles up to each end, and the end
      x.push_back(v);
      v = std::nextafter(v, 0.0);
    }
  }
  EXPECT_EQ(exp_normal_mismatches(x, "double"), 0u);
}

TEST(DetmathBits, DoubleRandomBitPatterns) {
  std::mt19937_64 rng(4242);
  std::vector<double> x(1 << 22);
  for (auto& v : x) v = of_bits<double>(rng());
  for (Fn f : kFns) EXPECT_EQ(compare(f, x, "random bits"), 0u) << name(f);
}

TEST(DetmathBits, DoubleRandomInRange) {
  std::mt19937_64 rng(99);
  std::vector<double> x(1 << 23);
  std::uniform_real_distribution<double> wide(-760.0, 760.0), narrow(-25.0, 25.0), tiny(-60.0, 6.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int which = static_cast<int>(i % 3);
    double d = which == 0 ? wide(rng) : which == 1 ? narrow(rng) : std::exp2(tiny(rng));
    if (which == 2 && (rng() & 1)) d = -d;
    x[i] = d;
  }
  for (Fn f : kFns) EXPECT_EQ(compare(f, x, "random in range"), 0u) << name(f);
}

TEST(DetmathBits, DoubleSpecialSweeps) {
  const auto x = special_inputs<double>(4096);
  for (Fn f : kFns) EXPECT_EQ(compare(f, x, "sweep"), 0u) << name(f);
}

// ---- GELU against the reference formula built from the reference exp -----------------------
// x sigmoid(2u) = x / (1 + exp(-2u)) with -2u capped at 80, and its derivative
// sg + 2 x (e sg^2) du (sg = sigmoid(2u), e = exp(-2u)), in the kernels' operation order.

constexpr double kSqrt2OverPi = 0x1.9884533d43651p-1;
constexpr double kCubic = 0.044715;

template <class T>
T exp_minus_2u_ref(T u) {
  const T a = T(-2) * u;
  return detref::exp(a < T(80) ? a : T(80));
}
template <class T>
T gelu_ref(T xi) {
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const T u = s * (xi + c * (xi * xi) * xi);
  return xi / (T(1) + exp_minus_2u_ref(u));
}
template <class T>
T gelu_grad_ref(T xi, T dyi) {
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const T x2 = xi * xi;
  const T u = s * (xi + c * x2 * xi);
  const T du = s * (T(1) + T(3) * c * x2);
  const T e = exp_minus_2u_ref(u);
  const T sg = T(1) / (T(1) + e);
  return dyi * (sg + T(2) * xi * (e * sg * sg) * du);
}

template <class T>
void gelu_bits_case(std::uint64_t seed) {
  const int n = (1 << 21) + 13;  // odd length: exercises the vector remainder
  test::Tensor<T> x("x", n), dy("dy", n), y("y", n), dx("dx", n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 2.0);
  std::uniform_real_distribution<double> wide(-40.0, 40.0);
  std::uniform_real_distribution<double> band(0.0, 2.5);
  using L = std::numeric_limits<T>;
  const T specials[] = {T(0),     -T(0),     L::infinity(),   -L::infinity(),   L::quiet_NaN(),
                        L::max(), -L::max(), L::denorm_min(), -L::denorm_min(), L::min(),
                        T(1e30),  T(-1e30),  T(1e-30)};
  for (int i = 0; i < n; ++i) {
    T v;
    if (i < n / 2) {  // GELU's blocks with every exp argument in det::exp_normal's range (|x| < 9.5)
      v = static_cast<T>(nd(rng));
    } else if (i % 997 < 13) {  // blocks that take det::exp
      v = specials[i % 997];
    } else if (i % 7 == 0) {  // -2u around det::ExpNormal's kLo and kExpMin (x ~ 10 float, ~ 21 double)
      v = static_cast<T>((sizeof(T) == 4 ? 9.0 : 20.0) + band(rng));
    } else if (i % 5 == 0) {
      v = static_cast<T>(wide(rng));
    } else if (i % 11 == 0) {
      v = static_cast<T>(std::ldexp(nd(rng), -static_cast<int>(rng() % 40)));
    } else {
      v = static_cast<T>(nd(rng));
    }
    x.h(i) = v;
    dy.h(i) = static_cast<T>(nd(rng));
    y.h(i) = T(12345);  // garbage: must be overwritten
    dx.h(i) = T(-777);
  }
  x.push();
  dy.push();
  y.push();
  dx.push();
  Gelu<T>::forward(Mode::deterministic, x.cvec(), y.vec());
  Gelu<T>::backward_input(Mode::deterministic, x.cvec(), dy.cvec(), dx.vec());
  Kokkos::fence();
  y.pull();
  dx.pull();
  int bad_y = 0, bad_dx = 0;
  for (int i = 0; i < n; ++i) {
    const T ry = gelu_ref(x.h(i));
    const T rdx = gelu_grad_ref(x.h(i), dy.h(i));
    if (bits(ry) != bits(y.h(i)) && bad_y++ < 5)
      std::printf("  gelu fwd x=%a got=%a ref=%a\n", static_cast<double>(x.h(i)), static_cast<double>(y.h(i)),
                  static_cast<double>(ry));
    if (bits(rdx) != bits(dx.h(i)) && bad_dx++ < 5)
      std::printf("  gelu bwd x=%a got=%a ref=%a\n", static_cast<double>(x.h(i)), static_cast<double>(dx.h(i)),
                  static_cast<double>(rdx));
  }
  EXPECT_EQ(bad_y, 0);
  EXPECT_EQ(bad_dx, 0);
}

TEST(DetmathBits, GeluFloatMatchesReference) {
  gelu_bits_case<float>(5);
}
TEST(DetmathBits, GeluDoubleMatchesReference) {
  gelu_bits_case<double>(6);
}

}  // namespace
}  // namespace minipipe
