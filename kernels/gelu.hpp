// GELU activation, tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (docs/design.md §2):
// forward and backward-input. It has no weights, so no backward-weight.
#pragma once

#include "types.hpp"

namespace minipipe {

template <class T>
struct Gelu {
  // y (n) = gelu(x (n)) = x sigmoid(2u) with det::exp, the same in both modes (see gelu.cpp).
  static void forward(Mode mode, CVec<T> x, Vec<T> y);
  // dx (n) = dy (n) * gelu'(x (n)), overwritten.
  static void backward_input(Mode mode, CVec<T> x, CVec<T> dy, Vec<T> dx);
};

extern template struct Gelu<float>;
extern template struct Gelu<double>;

}  // namespace minipipe
