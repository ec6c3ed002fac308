// Token + position embedding of the first stage: forward and backward-weight (the tokens have no
// gradient, so there is no backward-input).
#pragma once

#include "grad_accum.hpp"
#include "types.hpp"

namespace minipipe {

template <class Real>
struct Embedding {
  // out (B*T, C) = wte[tokens(b,t)] (V,C) + wpe[t] (Tmax,C); tokens (B*T) in [0,V), T <= Tmax.
  static void forward(int B, int T, CIdx tokens, CMat<Real> wte, CMat<Real> wpe, Mat<Real> out);

  // dwte (V*C) += dout rows scattered by token; dwpe (Tmax*C) += dout rows by position.
  // Deterministic: every token's row is added exactly (fixed point) by the thread that owns the
  // channel, so repeated tokens, micro-batch splits and call order cannot change the bits.
  static void backward_weight(Mode mode, int B, int T, CIdx tokens, CMat<Real> dout, GradAccum<Real>& dwte,
                              GradAccum<Real>& dwpe);
};

extern template struct Embedding<float>;
extern template struct Embedding<double>;

}  // namespace minipipe
