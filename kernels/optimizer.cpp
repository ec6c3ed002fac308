// AdamW and SGD update kernels, explicitly instantiated for float and double. Scalars that
// depend on the step are computed once on the host in double, without libm.
#include "optimizer.hpp"

#include <stdexcept>
#include <string>

namespace minipipe {

namespace {
// base^n by binary exponentiation: a fixed sequence of IEEE multiplications for a given n, so
// the bias corrections have the same bits on every platform (std::pow makes no such promise).
double pow_int(double base, int n) {
  double result = 1.0;
  double p = base;
  while (n > 0) {
    if (n & 1) result *= p;
    p *= p;
    n >>= 1;
  }
  return result;
}

}  // namespace

template <class T>
NonFinite AdamW<T>::update(const AdamWConfig& cfg, int step, bool apply_decay, Vec<T> param, CVec<T> grad, Vec<T> m,
                           Vec<T> v) {
  require(step >= 1, "AdamW::update", "step is 1-based, got " + std::to_string(step));
  const std::size_t n = param.extent(0);
  require(grad.extent(0) == n && m.extent(0) == n && v.extent(0) == n, "AdamW::update",
          "param, grad, m and v lengths differ");
  const T b1 = static_cast<T>(cfg.beta1);
  const T b2 = static_cast<T>(cfg.beta2);
  const T one_minus_b1 = static_cast<T>(1.0 - cfg.beta1);
  const T one_minus_b2 = static_cast<T>(1.0 - cfg.beta2);
  const T bc1 = static_cast<T>(1.0 - pow_int(cfg.beta1, step));
  const T bc2 = static_cast<T>(1.0 - pow_int(cfg.beta2, step));
  const T lr = static_cast<T>(cfg.lr);
  const T eps = static_cast<T>(cfg.eps);
  const T decay = static_cast<T>(apply_decay ? 1.0 - cfg.lr * cfg.weight_decay : 1.0);
  std::int64_t code = kFiniteCode;
  Kokkos::parallel_reduce(
      "AdamW::update", Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(n)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& lowest) {
        const T g = grad(i);
        const T mi = b1 * m(i) + one_minus_b1 * g;
        const T vi = b2 * v(i) + one_minus_b2 * (g * g);
        m(i) = mi;
        v(i) = vi;
        const T mhat = mi / bc1;
        const T vhat = vi / bc2;
        const T p = param(i) * decay - lr * (mhat / (sqrt_exact(vhat) + eps));
        param(i) = p;
        const std::int64_t c = non_finite_code(p, i);
        if (c < lowest) lowest = c;
      },
      Kokkos::Min<std::int64_t>(code));
  return decode_non_finite(code);
}

template <class T>
NonFinite Sgd<T>::update(const SgdConfig& cfg, bool apply_decay, Vec<T> param, CVec<T> grad, Vec<T> momentum_buf) {
  const std::size_t n = param.extent(0);
  require(grad.extent(0) == n, "Sgd::update", "param and grad lengths differ");
  const bool use_momentum = cfg.momentum != 0.0;
  require(!use_momentum || momentum_buf.extent(0) == n, "Sgd::update",
          "momentum = " + std::to_string(cfg.momentum) + " needs a momentum buffer of the parameter's length");
  const T lr = static_cast<T>(cfg.lr);
  const T mu = static_cast<T>(cfg.momentum);
  const T wd = static_cast<T>(apply_decay ? cfg.weight_decay : 0.0);
  std::int64_t code = kFiniteCode;
  Kokkos::parallel_reduce(
      "Sgd::update", Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(n)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& lowest) {
        T d = grad(i);
        if (wd != T(0)) d += wd * param(i);
        if (use_momentum) {
          d = mu * momentum_buf(i) + d;
          momentum_buf(i) = d;
        }
        const T p = param(i) - lr * d;
        param(i) = p;
        const std::int64_t c = non_finite_code(p, i);
        if (c < lowest) lowest = c;
      },
      Kokkos::Min<std::int64_t>(code));
  return decode_non_finite(code);
}

template struct AdamW<float>;
template struct AdamW<double>;
template struct Sgd<float>;
template struct Sgd<double>;

}  // namespace minipipe
