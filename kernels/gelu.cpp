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

// Both modes run these bodies with det::tanh. Fast mode used libm tanh, a scalar call per element
// that made it about 7x slower than the deterministic kernel, which the compiler vectorizes
// (det::tanh is branch-free straight-line code, force-inlined into the range loop). So fast mode
// gives the deterministic bits here, which its tolerance contract allows.
template <class T>
struct GeluForward {
  CVec<T> x;
  Vec<T> y;
  T s, c;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t i) const {
    const T xi = x(i);
    const T u = s * (xi + c * (xi * xi) * xi);  // same rounding as in backward_input
    y(i) = T(0.5) * xi * (T(1) + det::tanh(u));
  }
};

template <class T>
struct GeluBackwardInput {
  CVec<T> x, dy;
  Vec<T> dx;
  T s, c;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const std::size_t i) const {
    const T xi = x(i);
    const T x2 = xi * xi;
    const T u = s * (xi + c * x2 * xi);  // same rounding as in forward
    const T th = det::tanh(u);
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
  (void)mode;
  Kokkos::parallel_for("Gelu::forward", range, GeluForward<T>{x, y, s, c});
}

template <class T>
void Gelu<T>::backward_input(Mode mode, CVec<T> x, CVec<T> dy, Vec<T> dx) {
  if (x.extent(0) != dy.extent(0) || x.extent(0) != dx.extent(0))
    throw std::invalid_argument("Gelu::backward_input: x, dy and dx lengths differ");
  const T s = static_cast<T>(kSqrt2OverPi);
  const T c = static_cast<T>(kCubic);
  const Kokkos::RangePolicy<ExecSpace> range(0, x.extent(0));
  (void)mode;
  Kokkos::parallel_for("Gelu::backward_input", range, GeluBackwardInput<T>{x, dy, dx, s, c});
}

template struct Gelu<float>;
template struct Gelu<double>;

}  // namespace minipipe
