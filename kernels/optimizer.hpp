// Optimizers applied once per step after all micro-batches: AdamW (decoupled weight decay, as
// torch.optim.AdamW) and SGD with momentum. Elementwise, so deterministic in both modes.
#pragma once

#include "finite_check.hpp"
#include "types.hpp"

namespace minipipe {

struct AdamWConfig {
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
};

template <class T>
struct AdamW {
  // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p = p (1 - lr wd) - lr mhat / (sqrt(vhat) + eps)
  // with mhat = m / (1 - b1^step), vhat = v / (1 - b2^step). step is 1-based; the decay factor
  // applies only when apply_decay (2-D weights). param, grad, m, v all (n). Returns the first
  // non-finite element of the updated param, found in the same pass (with `into`: its code left in
  // device memory, no host wait, and an empty result; see checked_for_each).
  static NonFinite update(const AdamWConfig& cfg, int step, bool apply_decay, Vec<T> param, CVec<T> grad, Vec<T> m,
                          Vec<T> v, const CodeSlot* into = nullptr);
};

struct SgdConfig {
  double lr = 1e-2, momentum = 0.0, weight_decay = 0.0;
};

template <class T>
struct Sgd {
  // d = g + wd p (when apply_decay); buf = momentum buf + d, d = buf (when momentum != 0);
  // p -= lr d, as torch.optim.SGD without dampening. momentum_buf may be empty when momentum = 0.
  // Returns the first non-finite element of the updated param, found in the same pass (`into` as
  // AdamW's).
  static NonFinite update(const SgdConfig& cfg, bool apply_decay, Vec<T> param, CVec<T> grad, Vec<T> momentum_buf,
                          const CodeSlot* into = nullptr);
};

extern template struct AdamW<float>;
extern template struct AdamW<double>;
extern template struct Sgd<float>;
extern template struct Sgd<double>;

}  // namespace minipipe
