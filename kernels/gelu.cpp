// GELU (tanh approximation) forward and backward-input kernels, explicitly instantiated for
// float and double.
#include "gelu.hpp"

#include <stdexcept>
#include <type_traits>

#include "detmath.hpp"

namespace minipipe {

namespace {
// sqrt(2/pi) and the cubic coefficient of the tanh approximation.
constexpr double kSqrt2OverPi = 0x1.9884533d43651p-1;
constexpr double kCubic = 0.044715;
}  // namespace

namespace {

// Elements per work item: a block per host thread, so each step below is a loop over a block that
// vectorizes; one element per thread on GPUs. 256 on hosts: det::exp_array's range check ends in a
// horizontal AND once per block, a fifth of the forward at 64 (512 and 1024 were slower again).
constexpr int kLanes = std::is_same<ExecSpace::memory_space, Kokkos::HostSpace>::value ? 256 : 1;

// The argument of exp: -2u capped at 80. Beyond the cap sigmoid(2u) < 2e-35 and x sigmoid(2u) is 0
// to float precision, and e sg^2 (sigmoid's derivative without the cancellation of sg (1 - sg))
// stays finite.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T minus_2u_capped(T u) {
  const T a = T(-2) * u;
  return det::detail::select(a < T(80), a, T(80));  // a select: a ?: kept the loop scalar
}

// The elements i0 .. i0+m-1 of x, m = min(kLanes, n - i0) (returned): e[l] = exp(-2u) of x(i0 + l),
// the argument capped as above, with det::exp's bits (det::exp_array: through det::exp_normal when
// the whole block is in its range, |x| below about 9). u is formed the same way for forward and
// backward.
// kRaiseToNormal (the forward): the argument is also raised to det::ExpNormal's kLo, so every block
// takes det::exp_normal and no range test runs. The forward's bits do not move: below kLo, det::exp
// is under 2^-125 (float; 2^-1021 double) and so is exp(kLo), 1 + e rounds to 1 either way and
// y = x / 1. The cap keeps the argument <= 80 < kHi and makes it 80 for a NaN x. The backward keeps
// the exact e: its term 2 x (e sg^2) du does not vanish for every such x (du is inf where x^2
// overflows, and 0 * inf is NaN where exp(kLo) * inf is not).
// kCoarse (fast mode): det::exp_coarse where the block is in exp_normal's range (always in the
// forward), about an ulp from det::exp at a third of its operations; else det::exp as above.
template <class T, bool kRaiseToNormal, bool kCoarse>
KOKKOS_FORCEINLINE_FUNCTION int block_exps(const CVec<T>& x, std::size_t i0, std::size_t n, T s, T c, T (&e)[kLanes]) {
  const int m = n - i0 < static_cast<std::size_t>(kLanes) ? static_cast<int>(n - i0) : kLanes;
  T a[kLanes];
  for (int l = 0; l < m; ++l) {
    const T xi = x(i0 + l);
    const T al = minus_2u_capped(s * (xi + c * (xi * xi) * xi));
    if constexpr (kRaiseToNormal) {
      a[l] = det::detail::select(al > det::ExpNormal<T>::kLo, al, det::ExpNormal<T>::kLo);
    } else {
      a[l] = al;
    }
  }
  if constexpr (kLanes == 1) {  // a GPU thread: its one element, no padded vector block
    if (m == 1) {
      const bool normal = kRaiseToNormal || det::exp_normal_range(a[0]);
      e[0] = !normal ? det::exp(a[0]) : kCoarse ? det::exp_coarse(a[0]) : det::exp_normal(a[0]);
    }
  } else {
    det::exp_array_of<T, kCoarse>([&](const int l) { return a[l]; }, e, m, 0, kRaiseToNormal ? 1 : -1);
  }
  return m;
}

// Both modes compute the tanh form through the identity 0.5 (1 + tanh(u)) = sigmoid(2u)
// = 1 / (1 + exp(-2u)): one exp and one division per element, where det::tanh forms expm1(2u)
// as a pair and divides twice (the kernels were 1.7x slower with it), and no 1 + tanh(u) that
// cancels for negative x (at x = -3 the tanh form loses about 8 bits; x sigmoid(2u) keeps its
// relative accuracy down to x = -9, where the cap on exp's argument takes over at |y| < 1e-33).
// Deterministic mode's exp has det::exp's bits, fast mode's is det::exp_coarse (kCoarse); both are
// built from IEEE-exact operations, so every backend forms the same bits; the loops vectorize
// (branch-free straight-line code, force-inlined).
template <class T, bool kCoarse>
struct GeluForward {
  CVec<T> x;
  Vec<T> y;
  T s, c;
  std::size_t n;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t blk) const {
    const std::size_t i0 = blk * kLanes;
    T e[kLanes];
    const int m = block_exps<T, true, kCoarse>(x, i0, n, s, c, e);
    for (int l = 0; l < m; ++l) y(i0 + l) = x(i0 + l) / (T(1) + e[l]);
  }
};

template <class T, bool kCoarse>
struct GeluBackwardInput {
  CVec<T> x, dy;
  Vec<T> dx;
  T s, c;
  std::size_t n;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t blk) const {
    const std::size_t i0 = blk * kLanes;
    T e[kLanes];
    const int m = block_exps<T, false, kCoarse>(x, i0, n, s, c, e);
    // Into e in place, then one copy to dx: in the Kokkos 4.6 OpenMP build GCC had left the loop
    // that read x and dy and stored dx scalar (it could not rule out their overlap), 3.7x slower.
    for (int l = 0; l < m; ++l) {
      const T xi = x(i0 + l);
      const T du = s * (T(1) + T(3) * c * (xi * xi));
      const T sg = T(1) / (T(1) + e[l]);  // sigmoid(2u)
      // d/dx [x sigmoid(2u)] = sg + 2 x sg (1 - sg) du, and sg (1 - sg) = e sg^2.
      e[l] = dy(i0 + l) * (sg + T(2) * xi * (e[l] * sg * sg) * du);
    }
    for (int l = 0; l < m; ++l) dx(i0 + l) = e[l];
  }
};

std::size_t blocks(std::size_t n) {
  return (n + kLanes - 1) / kLanes;
}

}  // namespace

template <class T>
void Gelu<T>::forward(Mode mode, CVec<T> x, Vec<T> y) {
  if (x.extent(0) != y.extent(0)) throw std::invalid_argument("Gelu::forward: x and y lengths differ");
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const std::size_t n = x.extent(0);
  // 0.5 x (1 + tanh(s (x + c x^3))): 9 FLOPs an element, tanh counted as one.
  counters::WorkScope work("Gelu::forward", 9.0 * n, 2.0 * sizeof(T) * n);
  const Kokkos::RangePolicy<ExecSpace> range(0, blocks(n));
  if (mode == Mode::fast)
    Kokkos::parallel_for("Gelu::forward", range, GeluForward<T, true>{x, y, s, c, n});
  else
    Kokkos::parallel_for("Gelu::forward", range, GeluForward<T, false>{x, y, s, c, n});
}

template <class T>
void Gelu<T>::backward_input(Mode mode, CVec<T> x, CVec<T> dy, Vec<T> dx) {
  if (x.extent(0) != dy.extent(0) || x.extent(0) != dx.extent(0))
    throw std::invalid_argument("Gelu::backward_input: x, dy and dx lengths differ");
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const std::size_t n = x.extent(0);
  // The derivative of the formula above times dy: 16 FLOPs an element, tanh counted as one.
  counters::WorkScope work("Gelu::backward_input", 16.0 * n, 3.0 * sizeof(T) * n);
  const Kokkos::RangePolicy<ExecSpace> range(0, blocks(n));
  if (mode == Mode::fast)
    Kokkos::parallel_for("Gelu::backward_input", range, GeluBackwardInput<T, true>{x, dy, dx, s, c, n});
  else
    Kokkos::parallel_for("Gelu::backward_input", range, GeluBackwardInput<T, false>{x, dy, dx, s, c, n});
}

template struct Gelu<float>;
template struct Gelu<double>;

}  // namespace minipipe
