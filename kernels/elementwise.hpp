// Elementwise kernels of the residual stream: out = a + b, y += x, y = x (and a test hook's nudge).
// Exact per element (one rounding, no reduction), so one code path serves both modes.
#pragma once

#include "types.hpp"

namespace minipipe {

template <class T>
struct Elementwise {
  // out (n) = a (n) + b (n): the residual connection.
  static void add(CVec<T> a, CVec<T> b, Vec<T> out);
  // y (n) += x (n): sums the two gradient paths of a residual branch.
  static void accumulate(Vec<T> y, CVec<T> x);
  // y (n) = x (n)
  static void copy(CVec<T> x, Vec<T> y);
  // x(0) = nextafter(x(0), +inf) in a one-element kernel (NaN and +inf stay): the one-ULP test hook.
  static void next_up_first(Vec<T> x);
};

extern template struct Elementwise<float>;
extern template struct Elementwise<double>;

}  // namespace minipipe
