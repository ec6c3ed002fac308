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

template <bool Fast, class T>
KOKKOS_FORCEINLINE_FUNCTION T gelu_tanh(T u) {
  if constexpr (Fast) {
    return kmath::tanh(u);
  } else {
    return det::tanh(u);
  }
}

// The loop bodies are functors with force-inlined operator(), instantiated separately for the
// deterministic and the fast variant (not mode_tanh's per-element select): the deterministic body
// is then straight-line code (det::tanh is branch-free) inlined into the range loop, and the
// compiler vectorizes it on hosts with SIMD FMA. The operations, so the bits, are those of the
// former single lambda.
template <bool Fast, class T>
struct GeluForward {
  CVec<T> x;
  Vec<T> y;
  T s, c;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t i) const {
    const T xi = x(i);
    const T u = s * (xi + c * (xi * xi) * xi);  // same rounding as in backward_input
    y(i) = T(0.5) * xi * (T(1) + gelu_tanh<Fast>(u));
  }
};

template <bool Fast, class T>
struct GeluBackwardInput {
  CVec<T> x, dy;
  Vec<T> dx;
  T s, c;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t i) const {
    const T xi = x(i);
    const T x2 = xi * xi;
    const T u = s * (xi + c * x2 * xi);  // same rounding as in forward
    const T th = gelu_tanh<Fast>(u);
    const T sech2 = T(1) - th * th;
    const T du = s * (T(1) + T(3) * c * x2);
    const T local = T(0.5) * (T(1) + th) + T(0.5) * xi * sech2 * du;
    dx(i) = dy(i) * local;
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
    Kokkos::parallel_for("Gelu::forward(fast)", range, GeluForward<true, T>{x, y, s, c});
  else
    Kokkos::parallel_for("Gelu::forward", range, GeluForward<false, T>{x, y, s, c});
}

template <class T>
void Gelu<T>::backward_input(Mode mode, CVec<T> x, CVec<T> dy, Vec<T> dx) {
  if (x.extent(0) != dy.extent(0) || x.extent(0) != dx.extent(0))
    throw std::invalid_argument("Gelu::backward_input: x, dy and dx lengths differ");
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const Kokkos::RangePolicy<ExecSpace> range(0, x.extent(0));
  if (mode == Mode::fast)
    Kokkos::parallel_for("Gelu::backward_input(fast)", range, GeluBackwardInput<true, T>{x, dy, dx, s, c});
  else
    Kokkos::parallel_for("Gelu::backward_input", range, GeluBackwardInput<false, T>{x, dy, dx, s, c});
}

template struct Gelu<float>;
template struct Gelu<double>;

}  // namespace minipipe
