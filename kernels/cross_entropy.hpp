// Token cross-entropy of the last stage and the loss normalisation of docs/design.md §2:
// L = (sum of valid per-token losses over the global batch) / (valid tokens in the global batch).
#pragma once

#include <vector>

#include "types.hpp"

namespace minipipe {

template <class Real>
struct CrossEntropy {
  // losses (N) = -log softmax(logits(n,:))[targets(n)], 0 where targets(n) = -1 (padding).
  // logits (N,V). Deterministic: max and sum of exp per row in rowred's canonical order
  // (row_reduce.hpp), the same on the host and the device path.
  static void forward(Mode mode, CMat<Real> logits, CIdx targets, Vec<Real> losses);

  // Per-sample sums in fixed order t = 0..T-1, in double: loss_sum (B) and valid tokens (B).
  static void sample_sums(int B, int T, CVec<Real> losses, CIdx targets, Kokkos::View<double*, MemSpace> loss_sum,
                          Kokkos::View<int*, MemSpace> valid);

  // dlogits (N,V) = (softmax(logits) - onehot(target)) * scale at valid rows, 0 at padding rows;
  // scale = 1 / (valid tokens in the WHOLE global batch), overwritten.
  static void backward_input(Mode mode, CMat<Real> logits, CIdx targets, Real scale, Mat<Real> dlogits);
};

extern template struct CrossEntropy<float>;
extern template struct CrossEntropy<double>;

// Global-batch loss from per-sample loss sums and valid-token counts (any order, any split):
// the sums are added exactly in fixed point, then divided once by the total count. Never the
// mean of micro-batch means. Throws if the lengths differ, no token is valid, or a sum overflows.
double global_loss(const std::vector<double>& loss_sums, const std::vector<int>& counts);

}  // namespace minipipe
