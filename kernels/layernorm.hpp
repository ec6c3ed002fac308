// LayerNorm (eps 1e-5, biased variance) over the channels of each row: forward, backward-input (I)
// and backward-weight (W) as separate calls, so zero-bubble schedules can defer W.
#pragma once

#include "grad_accum.hpp"
#include "types.hpp"

namespace minipipe {

template <class T>
struct LayerNorm {
  static constexpr double kEps = 1e-5;

  // out (N,C) = (x - mean) * rstd * w + b per row of x (N,C); saves mean (N) and rstd (N) for
  // the backward calls. Deterministic: each row reduced in rowred's canonical order
  // (row_reduce.hpp), the same on the host and the device path.
  static void forward(Mode mode, CMat<T> x, CVec<T> w, CVec<T> b, Mat<T> out, Vec<T> mean, Vec<T> rstd);

  // dx (N,C) = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * w; overwritten.
  static void backward_input(Mode mode, CMat<T> x, CVec<T> w, CVec<T> mean, CVec<T> rstd, CMat<T> dout, Mat<T> dx);

  // dw (C) += sum_n dout * xhat, db (C) += sum_n dout. Deterministic: each sample's partial
  // (rows_per_sample consecutive rows, summed in row order) is added exactly, so the result does
  // not depend on how samples are split across calls or on the call order.
  static void backward_weight(Mode mode, CMat<T> x, CVec<T> mean, CVec<T> rstd, CMat<T> dout, int rows_per_sample,
                              GradAccum<T>& dw, GradAccum<T>& db);
};

extern template struct LayerNorm<float>;
extern template struct LayerNorm<double>;

}  // namespace minipipe
