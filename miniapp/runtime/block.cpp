// One GPT-2 block: forward, backward-input and backward-weight, each a list of kernel calls that
// mirror each other (backward-input runs forward's kernels in reverse, backward-weight their W).
#include "miniapp/runtime/block.hpp"

#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"

namespace minipipe {

namespace {
template <class T>
CMat<T> weight(const Param<T>* p) {
  return CMat<T>(p->value.data(), p->spec.shape[0], p->spec.shape[1]);
}
template <class T>
CVec<T> vec(const Param<T>* p) {
  return CVec<T>(p->value.data(), p->value.extent(0));
}
// A (rows, cols) buffer as the flat vector the elementwise and statistics kernels take.
template <class T>
CVec<T> flat(const View2<T>& x) {
  return CVec<T>(x.data(), x.size());
}
template <class T>
Vec<T> flat_mut(const View2<T>& x) {
  return Vec<T>(x.data(), x.size());
}
// Hands row t's value to the call's tap under the row's name (a string literal, so it ends in NUL).
template <class T>
void tap(const typename Block<T>::Call& c, const BlockActivations<T>& a, BlockTensor t) {
  if (c.tap) c.tap->produced(row_of(t).name.data(), a[t]);
}
}  // namespace

template <class T>
void Block<T>::forward_attention(const Call& c, const BlockActivations<T>& a) {
  const ModelShape& s = c.shape;
  Attention<T>::forward(c.mode, c.n, s.seq_len, s.channels, s.n_head, a.qkv, a.att, a.atty);  // (N,3C) -> att, (N,C)
  tap(c, a, BlockTensor::att);
  tap(c, a, BlockTensor::atty);
}

template <class T>
void Block<T>::forward_saved(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a) {
  LayerNorm<T>::forward(c.mode, a.x_in, vec(P.ln1_w), vec(P.ln1_b), a.ln1, flat_mut(a.ln1_mean),
                        flat_mut(a.ln1_rstd));  // (N,C) -> (N,C), (N,1), (N,1)
  tap(c, a, BlockTensor::ln1);
  tap(c, a, BlockTensor::ln1_mean);
  tap(c, a, BlockTensor::ln1_rstd);
  Linear<T>::forward(c.mode, a.ln1, weight(P.qkv_w), vec(P.qkv_b), a.qkv, c.kernels, &P.qkv_w->packed_fwd);  // (N,3C)
  tap(c, a, BlockTensor::qkv);
  forward_attention(c, a);
  Linear<T>::forward(c.mode, a.atty, weight(P.attn_proj_w), vec(P.attn_proj_b), a.attn_proj, c.kernels,
                     &P.attn_proj_w->packed_fwd);  // (N,C)
  tap(c, a, BlockTensor::attn_proj);
  Elementwise<T>::add(flat(a.x_in), flat(a.attn_proj), flat_mut(a.res1));  // (N,C)
  tap(c, a, BlockTensor::res1);
  LayerNorm<T>::forward(c.mode, a.res1, vec(P.ln2_w), vec(P.ln2_b), a.ln2, flat_mut(a.ln2_mean),
                        flat_mut(a.ln2_rstd));  // (N,C) -> (N,C), (N,1), (N,1)
  tap(c, a, BlockTensor::ln2);
  tap(c, a, BlockTensor::ln2_mean);
  tap(c, a, BlockTensor::ln2_rstd);
  Linear<T>::forward(c.mode, a.ln2, weight(P.fc_w), vec(P.fc_b), a.fc, c.kernels, &P.fc_w->packed_fwd);  // (N,4C)
  tap(c, a, BlockTensor::fc);
  Gelu<T>::forward(c.mode, flat(a.fc), flat_mut(a.gelu));  // (N,4C)
  tap(c, a, BlockTensor::gelu);
}

template <class T>
void Block<T>::forward(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> x_out) {
  forward_saved(c, P, a);
  Linear<T>::forward(c.mode, a.gelu, weight(P.fc_proj_w), vec(P.fc_proj_b), a.fc_proj, c.kernels,
                     &P.fc_proj_w->packed_fwd);  // (N,4C) -> (N,C)
  tap(c, a, BlockTensor::fc_proj);
  Elementwise<T>::add(flat(a.res1), flat(a.fc_proj), Vec<T>(x_out.data(), x_out.size()));  // (N,C)
}

template <class T>
void Block<T>::backward_input(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx) {
  backward_parts(c, P, a, dx, false);
}

template <class T>
void Block<T>::backward(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx) {
  backward_parts(c, P, a, dx, true);
}

template <class T>
void Block<T>::backward_parts(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx,
                              bool weights) {
  const ModelShape& s = c.shape;
  // With `weights`, each part's W as soon as its last operand is made (and tapped).
  auto w = [&](Weights part) {
    if (weights) weight_grads(c, P, a, part);
  };
  Linear<T>::backward_input(c.mode, a.dout, weight(P.fc_proj_w), a.d_gelu, c.kernels,
                            &P.fc_proj_w->packed_bwd);  // (N,C) -> (N,4C)
  tap(c, a, BlockTensor::d_gelu);
  w(Weights::fc_proj);
  Gelu<T>::backward_input(c.mode, flat(a.fc), flat(a.d_gelu), flat_mut(a.d_fc));  // (N,4C)
  tap(c, a, BlockTensor::d_fc);
  Linear<T>::backward_input(c.mode, a.d_fc, weight(P.fc_w), a.d_ln2, c.kernels, &P.fc_w->packed_bwd);  // (N,C)
  tap(c, a, BlockTensor::d_ln2);
  w(Weights::fc);
  LayerNorm<T>::backward_input(c.mode, a.res1, vec(P.ln2_w), flat(a.ln2_mean), flat(a.ln2_rstd), a.d_ln2,
                               a.d_res1_ln2);  // (N,C)
  tap(c, a, BlockTensor::d_res1_ln2);
  w(Weights::ln2);
  Elementwise<T>::add(flat(a.dout), flat(a.d_res1_ln2), flat_mut(a.d_res1));  // (N,C)
  tap(c, a, BlockTensor::d_res1);
  Linear<T>::backward_input(c.mode, a.d_res1, weight(P.attn_proj_w), a.d_atty, c.kernels,
                            &P.attn_proj_w->packed_bwd);  // (N,C)
  tap(c, a, BlockTensor::d_atty);
  w(Weights::attn_proj);
  Attention<T>::backward_input(c.mode, c.n, s.seq_len, s.channels, s.n_head, a.qkv, a.att, a.d_atty,
                               a.d_qkv);  // (N,3C)
  tap(c, a, BlockTensor::d_qkv);
  Linear<T>::backward_input(c.mode, a.d_qkv, weight(P.qkv_w), a.d_ln1, c.kernels, &P.qkv_w->packed_bwd);  // (N,C)
  tap(c, a, BlockTensor::d_ln1);
  w(Weights::qkv);
  LayerNorm<T>::backward_input(c.mode, a.x_in, vec(P.ln1_w), flat(a.ln1_mean), flat(a.ln1_rstd), a.d_ln1,
                               a.d_x_ln1);  // (N,C)
  tap(c, a, BlockTensor::d_x_ln1);
  w(Weights::ln1);
  Elementwise<T>::add(flat(a.d_res1), flat(a.d_x_ln1), Vec<T>(dx.data(), dx.size()));  // (N,C)
}

template <class T>
void Block<T>::weight_grads(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Weights part) {
  const int Tl = c.shape.seq_len;
  switch (part) {
    case Weights::fc_proj:
      Linear<T>::backward_weight(c.mode, a.gelu, a.dout, Tl, P.fc_proj_w->acc, &P.fc_proj_b->acc, c.kernels);
      break;
    case Weights::fc:
      Linear<T>::backward_weight(c.mode, a.ln2, a.d_fc, Tl, P.fc_w->acc, &P.fc_b->acc, c.kernels);
      break;
    case Weights::ln2:
      LayerNorm<T>::backward_weight(c.mode, a.res1, flat(a.ln2_mean), flat(a.ln2_rstd), a.d_ln2, Tl, P.ln2_w->acc,
                                    P.ln2_b->acc);
      break;
    case Weights::attn_proj:
      Linear<T>::backward_weight(c.mode, a.atty, a.d_res1, Tl, P.attn_proj_w->acc, &P.attn_proj_b->acc, c.kernels);
      break;
    case Weights::qkv:
      Linear<T>::backward_weight(c.mode, a.ln1, a.d_qkv, Tl, P.qkv_w->acc, &P.qkv_b->acc, c.kernels);
      break;
    case Weights::ln1:
      LayerNorm<T>::backward_weight(c.mode, a.x_in, flat(a.ln1_mean), flat(a.ln1_rstd), a.d_ln1, Tl, P.ln1_w->acc,
                                    P.ln1_b->acc);
      break;
  }
}

template <class T>
void Block<T>::backward_weight(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a) {
  for (Weights part : {Weights::fc_proj, Weights::fc, Weights::ln2, Weights::attn_proj, Weights::qkv, Weights::ln1})
    weight_grads(c, P, a, part);
}

template struct Block<float>;
template struct Block<double>;

}  // namespace minipipe
