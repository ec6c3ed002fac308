// Linear layer of miniPipe with torch.nn.Linear semantics, y = x W^T + b, weights row-major
// [out,in]: forward (F), backward-input (I) and backward-weight (W), deterministic or fast.
#pragma once

#include "gemm.hpp"
#include "grad_accum.hpp"
#include "types.hpp"
#include "workspace.hpp"

namespace minipipe {

// deterministic: every GEMM is gemm_det (sequential FMA chain per element); weight/bias
//   gradients add one exact per-sample partial per element into GradAccum's fixed point.
// fast: plain sums; the GEMMs run where fast_gemm_on_gemm_det() (kernel_path.hpp) says: gemm_det
//   (the host default where its SIMD microkernel exists) or KokkosBlas::gemm (vendor BLAS / cuBLAS).
// Every entry takes the caller's KernelWorkspace (GEMM packing, dW partials), whose bytes() the caller
// counts; calls sharing one KernelWorkspace must not run concurrently.
template <class T>
struct Linear {
  // y (N,O) = x (N,I) W (O,I)^T + b (O); b may be an empty view (no bias). y is overwritten.
  // When `packed` is enabled (see PackedB) and the call runs gemm_det, W^T is packed into it for the
  // next calls with this W (host path only: the device path and BLAS ignore `packed`).
  static void forward(Mode mode, CMat<T> x, CMat<T> W, CVec<T> b, Mat<T> y, KernelWorkspace& ws,
                      PackedB<T>* packed = nullptr);

  // dx (N,I) = dy (N,O) W (O,I); dx is overwritten. `packed` as in forward (it holds W, not W^T:
  // a weight needs one PackedB for each of the two calls).
  static void backward_input(Mode mode, CMat<T> dy, CMat<T> W, Mat<T> dx, KernelWorkspace& ws,
                             PackedB<T>* packed = nullptr);

  // dW (O,I) += sum_n dy(n,o) x(n,i);  db (O) += sum_n dy(n,o)  (db may be nullptr).
  // Rows come in samples of rows_per_sample consecutive rows. Deterministic: each sample's
  // partial is the gemm_det chain with K = rows_per_sample (t = 0..T-1 in order), added exactly
  // per element (fused into the GEMM on host float builds: gemm_det_exact), so the result does
  // not depend on how samples are split into calls or on the call order. Fast: one GEMM over all
  // rows added into the running sums (gemm_det accumulate or KokkosBlas::gemm with beta = 1).
  // dW and db must have been created in the same mode.
  static void backward_weight(Mode mode, CMat<T> x, CMat<T> dy, int rows_per_sample, GradAccum<T>& dW, GradAccum<T>* db,
                              KernelWorkspace& ws);

  // With dW.defer_weight_samples(true), the deterministic host float path copies each call's
  // samples (x and dy rows) into dW.pending instead of adding them at once, and adds the held
  // samples in one gemm_det_exact call when gemm_det_exact_group(rows_per_sample) of them are
  // held (a call with at least that many samples runs directly). The bits are those of the direct
  // calls; the gain is one fold of the exact accumulators per group instead of per call.
  // With dW.defer_weight_samples(true, true) the samples are held by reference instead (the caller
  // keeps the rows, consecutive calls on consecutive rows of one buffer): nothing is copied, and
  // the held rows go through one call when the group is full (deterministic) or at the flush
  // (fast mode: one GEMM over all held rows, the dW chain continued exactly as call by call).
  // flush_weight adds what is still held; it must run before dW is read or reduced.
  static void flush_weight(GradAccum<T>& dW, KernelWorkspace& ws);
};

extern template struct Linear<float>;
extern template struct Linear<double>;

}  // namespace minipipe
