// Causal multi-head self-attention core (softmax(q k^T / sqrt(hs)) v per head): forward and
// backward-input. The QKV and output projections are Linear layers and live elsewhere.
#pragma once

#include "types.hpp"

namespace minipipe {

template <class Real>
struct Attention {
  // qkv (B*T, 3C): per row [q | k | v], each C split into H heads of hs = C/H; scale 1/sqrt(hs).
  // att (B*H*T, T): softmax probabilities saved for backward (masked entries 0); out (B*T, C).
  // One thread per (b, h, query t) row; every sum runs in index order.
  static void forward(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att, Mat<Real> out);

  // dqkv (B*T, 3C) overwritten with d(sum out*dout)/d(qkv). att must come from forward; dqkv
  // must not alias qkv, att or dout (it also serves as the kernels' scratch).
  static void backward_input(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, CMat<Real> att, CMat<Real> dout,
                             Mat<Real> dqkv);
};

extern template struct Attention<float>;
extern template struct Attention<double>;

}  // namespace minipipe
