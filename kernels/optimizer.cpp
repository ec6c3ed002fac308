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
                           Vec<T> v, const CodeSlot* into) {
  require(step >= 1, "AdamW::update", "step is 1-based, got " + std::to_string(step));
  const std::size_t n = param.extent(0);
  require(grad.extent(0) == n && m.extent(0) == n && v.extent(0) == n, "AdamW::update",
          "param, grad, m and v lengths differ");
  // m, v, their bias corrections and the step: 15 FLOPs a parameter; p, g, m, v read, p, m, v written.
  counters::WorkScope work("AdamW::update", 15.0 * n, 7.0 * sizeof(T) * n);
  const T b1 = static_cast<T>(cfg.beta1);
  const T b2 = static_cast<T>(cfg.beta2);
  const T one_minus_b1 = static_cast<T>(1.0 - cfg.beta1);
  const T one_minus_b2 = static_cast<T>(1.0 - cfg.beta2);
  const T bc1 = static_cast<T>(1.0 - pow_int(cfg.beta1, step));
  const T bc2 = static_cast<T>(1.0 - pow_int(cfg.beta2, step));
  const T lr = static_cast<T>(cfg.lr);
  const T eps = static_cast<T>(cfg.eps);
  const T decay = static_cast<T>(apply_decay ? 1.0 - cfg.lr * cfg.weight_decay : 1.0);
  // Raw pointers into the four arrays for checked_for_each's block loop (it vectorizes on the host).
  T* const pp = param.data();
  const T* const gp = grad.data();
  T* const mp = m.data();
  T* const vp = v.data();
  return checked_for_each<T>(
      "AdamW::update", param,
      KOKKOS_LAMBDA(const std::int64_t i) {
        const T g = gp[i];
        const T mi = b1 * mp[i] + one_minus_b1 * g;
        const T vi = b2 * vp[i] + one_minus_b2 * (g * g);
        mp[i] = mi;
        vp[i] = vi;
        const T mhat = mi / bc1;
        const T vhat = vi / bc2;
        const T p = pp[i] * decay - lr * (mhat / (sqrt_exact(vhat) + eps));
        pp[i] = p;
        return p;
      },
      into);
}

template <class T>
NonFinite Sgd<T>::update(const SgdConfig& cfg, bool apply_decay, Vec<T> param, CVec<T> grad, Vec<T> momentum_buf,
                         const CodeSlot* into) {
  const std::size_t n = param.extent(0);
  require(grad.extent(0) == n, "Sgd::update", "param and grad lengths differ");
  counters::WorkScope work("Sgd::update", 5.0 * n, 5.0 * sizeof(T) * n);
  const bool use_momentum = cfg.momentum != 0.0;
  require(!use_momentum || momentum_buf.extent(0) == n, "Sgd::update",
          "momentum = " + std::to_string(cfg.momentum) + " needs a momentum buffer of the parameter's length");
  const T lr = static_cast<T>(cfg.lr);
  const T mu = static_cast<T>(cfg.momentum);
  const T wd = static_cast<T>(apply_decay ? cfg.weight_decay : 0.0);
  T* const pp = param.data();
  const T* const gp = grad.data();
  T* const mb = momentum_buf.data();
  return checked_for_each<T>(
      "Sgd::update", param,
      KOKKOS_LAMBDA(const std::int64_t i) {
        T d = gp[i];
        if (wd != T(0)) d += wd * pp[i];
        if (use_momentum) {
          d = mu * mb[i] + d;
          mb[i] = d;
        }
        const T p = pp[i] - lr * d;
        pp[i] = p;
        return p;
      },
      into);
}

template struct AdamW<float>;
template struct AdamW<double>;
template struct Sgd<float>;
template struct Sgd<double>;

}  // namespace minipipe
