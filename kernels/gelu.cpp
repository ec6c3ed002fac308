// GELU (tanh approximation) forward and backward-input kernels, explicitly instantiated for
// float and double.
#include "gelu.hpp"

#include <stdexcept>

#include "detmath.hpp"

namespace minipipe {

namespace {
// sqrt(2/pi) and the cubic coefficient of the tanh approximation.
constexpr double kSqrt2OverPi = 0x1.9884533d43651p-1;
constexpr double kCubic = 0.044715;
}  // namespace

namespace {

// exp(-2u) with -2u capped at 80: beyond it sigmoid(2u) < 2e-35 and x sigmoid(2u) is 0 to float
// precision, and e sg^2 (sigmoid's derivative without the cancellation of sg (1 - sg)) stays finite.
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T exp_minus_2u(T u) {
  const T a = T(-2) * u;
  return det::exp(det::detail::select(a < T(80), a, T(80)));  // a select: a ?: kept the loop scalar
}

// kFast = false (deterministic mode): det::tanh, as the contract asks. Fast mode once used libm
// tanh, a scalar call per element, 7x slower than these loops, which the compiler vectorizes (the
// det:: functions are branch-free straight-line code, force-inlined into the range loop). It now
// uses the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): one det::exp and one
// division per element, where det::tanh forms expm1(2u) as a pair and divides twice.
template <class T, bool kFast>
struct GeluForward {
  CVec<T> x;
  Vec<T> y;
  T s, c;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t i) const {
    const T xi = x(i);
    const T u = s * (xi + c * (xi * xi) * xi);  // same rounding as in backward_input
    if constexpr (kFast)
      y(i) = xi / (T(1) + exp_minus_2u(u));
    else
      y(i) = T(0.5) * xi * (T(1) + det::tanh(u));
  }
};

template <class T, bool kFast>
struct GeluBackwardInput {
  CVec<T> x, dy;
  Vec<T> dx;
  T s, c;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t i) const {
    const T xi = x(i);
    const T x2 = xi * xi;
    const T u = s * (xi + c * x2 * xi);  // same rounding as in forward
    const T du = s * (T(1) + T(3) * c * x2);
    if constexpr (kFast) {
      const T e = exp_minus_2u(u);
      const T sg = T(1) / (T(1) + e);  // sigmoid(2u)
      // d/dx [x sigmoid(2u)] = sg + 2 x sg (1 - sg) du, and sg (1 - sg) = e sg^2.
      dx(i) = dy(i) * (sg + T(2) * xi * (e * sg * sg) * du);
    } else {
      const T th = det::tanh(u);
      const T sech2 = T(1) - th * th;
      const T local = T(0.5) * (T(1) + th) + T(0.5) * xi * sech2 * du;
      dx(i) = dy(i) * local;
    }
  }
};

}  // namespace

template <class T>
void Gelu<T>::forward(Mode mode, CVec<T> x, Vec<T> y) {
  if (x.extent(0) != y.extent(0)) throw std::invalid_argument("Gelu::forward: x and y lengths differ");
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const Kokkos::RangePolicy<ExecSpace> range(0, x.extent(0));
  if (mode == Mode::fast)
    Kokkos::parallel_for("Gelu::forward", range, GeluForward<T, true>{x, y, s, c});
  else
    Kokkos::parallel_for("Gelu::forward", range, GeluForward<T, false>{x, y, s, c});
}

template <class T>
void Gelu<T>::backward_input(Mode mode, CVec<T> x, CVec<T> dy, Vec<T> dx) {
  if (x.extent(0) != dy.extent(0) || x.extent(0) != dx.extent(0))
    throw std::invalid_argument("Gelu::backward_input: x, dy and dx lengths differ");
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const Kokkos::RangePolicy<ExecSpace> range(0, x.extent(0));
  if (mode == Mode::fast)
    Kokkos::parallel_for("Gelu::backward_input", range, GeluBackwardInput<T, true>{x, dy, dx, s, c});
  else
    Kokkos::parallel_for("Gelu::backward_input", range, GeluBackwardInput<T, false>{x, dy, dx, s, c});
}

template struct Gelu<float>;
template struct Gelu<double>;

}  // namespace minipipe
