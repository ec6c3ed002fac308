// Causal attention's canonical order written once, as plain loops (docs/design.md §4 rule 1): every
// attention path (host register tiles, device team kernels, this file's row kernels) computes
// each element with exactly these chains, and the kernel tests compare every path with them.
#pragma once

#include <string>

#include "detmath.hpp"
#include "row_reduce.hpp"
#include "team.hpp"
#include "types.hpp"

namespace minipipe {
namespace attention_order {

// Row r = (b*H + h)*T + t of att (B*H*T, T) and query (b, t)'s head-h slice of out (B*T, C);
// qkv (B*T, 3C) holds [q | k | v] per token, heads of hs = C/H channels, scale = 1/sqrt(hs).
//   score(t2) = (((0 + q_t[0] k_t2[0]) + q_t[1] k_t2[1]) + ...) * scale  for t2 = 0..t (fma chain)
//   mx = the first maximal score scanning t2 upwards
//   e(t2) = det::exp(score(t2) - mx);  sum = rowred::reduce<Sum> over t2 = 0..t of e
//   att(t2) = e(t2) / sum  (t2 <= t),  0 above the diagonal
//   out_t[i] = fma chain over t2 = 0..t of att(t2) v_t2[i]
template <class Real, class CM, class M>
KOKKOS_INLINE_FUNCTION void forward_row(int r, int T, int C, int H, Real scale, const CM& qkv, const M& att,
                                        const M& out) {
  const int hs = C / H;
  const int b = r / (H * T);
  const int h = (r / T) % H;
  const int t = r % T;
  const int nq = b * T + t;
  const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
  Real mx = 0;
  for (int t2 = 0; t2 <= t; ++t2) {  // scores, kept in att until normalised
    const int nk = b * T + t2;
    Real dot = 0;
    for (int i = 0; i < hs; ++i) dot = fma_exact(qkv(nq, qo + i), qkv(nk, ko + i), dot);
    const Real s = dot * scale;
    att(r, t2) = s;
    mx = (t2 == 0 || s > mx) ? s : mx;
  }
  for (int t2 = 0; t2 <= t; ++t2) att(r, t2) = det::exp(att(r, t2) - mx);
  const Real sum = rowred::reduce<rowred::Sum, Real>(t + 1, [&](const int t2, const Real a) { return a + att(r, t2); });
  for (int t2 = 0; t2 <= t; ++t2) att(r, t2) = att(r, t2) / sum;
  for (int t2 = t + 1; t2 < T; ++t2) att(r, t2) = 0;
  for (int i = 0; i < hs; ++i) {
    Real o = 0;
    for (int t2 = 0; t2 <= t; ++t2) o = fma_exact(att(r, t2), qkv(b * T + t2, vo + i), o);
    out(nq, qo + i) = o;
  }
}

// The backward, with datt(t,t2) = dout_t . v_t2 (an fma chain over i):
//   rowdot(t) = rowred::reduce<Sum> over t2 = 0..t, each lane an fma chain of att(t,t2) datt(t,t2)
//   dpre(t,t2) = (att(t,t2) (datt(t,t2) - rowdot(t))) * scale
//   dq_t[i] = fma chain over t2 = 0..t of dpre(t,t2) k_t2[i]
//   dk_t2[i] = fma chain over t = t2..T-1 of dpre(t,t2) q_t[i]
//   dv_t2[i] = fma chain over t = t2..T-1 of att(t,t2) dout_t[i]
// rowdot of query row r (r as in forward_row).
template <class Real, class CM, class CA>
KOKKOS_INLINE_FUNCTION Real rowdot(int r, int T, int C, int H, const CM& qkv, const CA& att, const CM& dout) {
  const int hs = C / H;
  const int b = r / (H * T);
  const int h = (r / T) % H;
  const int t = r % T;
  const int nq = b * T + t;
  const int qo = h * hs, vo = 2 * C + h * hs;
  return rowred::reduce<rowred::Sum, Real>(t + 1, [&](const int t2, const Real a) {
    Real d = 0;
    for (int i = 0; i < hs; ++i) d = fma_exact(dout(nq, qo + i), qkv(b * T + t2, vo + i), d);
    return fma_exact(att(r, t2), d, a);
  });
}

// dk and dv of key row r = (b*H + h)*T + t2; rd(q) is the rowdot of query row q.
template <class Real, class CM, class CA, class M, class RowDot>
KOKKOS_INLINE_FUNCTION void dkv_row(int r, int T, int C, int H, Real scale, const CM& qkv, const CA& att,
                                    const CM& dout, const M& dqkv, const RowDot& rd) {
  const int hs = C / H;
  const int b = r / (H * T);
  const int h = (r / T) % H;
  const int t2 = r % T;
  const int nk = b * T + t2;
  const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
  for (int i = 0; i < hs; ++i) {
    dqkv(nk, ko + i) = 0;
    dqkv(nk, vo + i) = 0;
  }
  for (int t = t2; t < T; ++t) {  // the queries that see key t2
    const int rq = (b * H + h) * T + t;
    const int nq = b * T + t;
    const Real a = att(rq, t2);
    Real d = 0;
    for (int i = 0; i < hs; ++i) d = fma_exact(dout(nq, qo + i), qkv(nk, vo + i), d);
    const Real dp = (a * (d - rd(rq))) * scale;
    for (int i = 0; i < hs; ++i) {
      dqkv(nk, ko + i) = fma_exact(dp, qkv(nq, qo + i), dqkv(nk, ko + i));
      dqkv(nk, vo + i) = fma_exact(a, dout(nq, qo + i), dqkv(nk, vo + i));
    }
  }
}

// dq of query row r, whose rowdot is rd.
template <class Real, class CM, class CA, class M>
KOKKOS_INLINE_FUNCTION void dq_row(int r, int T, int C, int H, Real scale, const CM& qkv, const CA& att, const CM& dout,
                                   const M& dqkv, Real rd) {
  const int hs = C / H;
  const int b = r / (H * T);
  const int h = (r / T) % H;
  const int t = r % T;
  const int nq = b * T + t;
  const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
  for (int i = 0; i < hs; ++i) dqkv(nq, qo + i) = 0;
  for (int t2 = 0; t2 <= t; ++t2) {
    const int nk = b * T + t2;
    Real d = 0;
    for (int i = 0; i < hs; ++i) d = fma_exact(dout(nq, qo + i), qkv(nk, vo + i), d);
    const Real dp = (att(r, t2) * (d - rd)) * scale;
    for (int i = 0; i < hs; ++i) dqkv(nq, qo + i) = fma_exact(dp, qkv(nk, ko + i), dqkv(nq, qo + i));
  }
}

template <class Real>
KOKKOS_INLINE_FUNCTION Real scale_of(int C, int H) {
  return Real(1) / sqrt_exact(static_cast<Real>(C / H));
}

// Their range policy: at most 256 threads a block and one block an SM / CU, so a GPU compiler may
// give a row's thread the registers of its lane partials (unbounded, HIP compiles for 1024-thread
// blocks, at most 128 VGPRs: backward's rowdot spilled 94 for double on gfx90a).
using RowPolicy = Kokkos::RangePolicy<ExecSpace, team::LaunchBounds<256, 1>>;

// The order as kernels, one thread per row (labels: prefix + "forward_rows", ...): Attention's
// path for heads too large for team scratch, and what the tests compare every path with.
template <class Real>
void forward(const std::string& prefix, int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att, Mat<Real> out) {
  const Real scale = scale_of<Real>(C, H);
  Kokkos::parallel_for(
      prefix + "forward_rows", RowPolicy(0, B * H * T),
      KOKKOS_LAMBDA(const int r) { forward_row<Real>(r, T, C, H, scale, qkv, att, out); });
}

// rowdot(t) is parked in the first dq entry of its row (dqkv is overwritten anyway: no scratch);
// the dk/dv kernel reads it there, the dq kernel reads it before overwriting it.
template <class Real>
void backward_input(const std::string& prefix, int B, int T, int C, int H, CMat<Real> qkv, CMat<Real> att,
                    CMat<Real> dout, Mat<Real> dqkv) {
  const Real scale = scale_of<Real>(C, H);
  const int rows = B * H * T, hs = C / H;
  Kokkos::parallel_for(
      prefix + "backward_rowdot_rows", RowPolicy(0, rows), KOKKOS_LAMBDA(const int r) {
        const int nq = (r / (H * T)) * T + r % T, qo = ((r / T) % H) * hs;
        dqkv(nq, qo) = rowdot<Real>(r, T, C, H, qkv, att, dout);
      });
  Kokkos::parallel_for(
      prefix + "backward_dkv_rows", RowPolicy(0, rows), KOKKOS_LAMBDA(const int r) {
        auto parked = [&](const int rq) { return dqkv((rq / (H * T)) * T + rq % T, ((rq / T) % H) * hs); };
        dkv_row<Real>(r, T, C, H, scale, qkv, att, dout, dqkv, parked);
      });
  Kokkos::parallel_for(
      prefix + "backward_dq_rows", RowPolicy(0, rows), KOKKOS_LAMBDA(const int r) {
        const int nq = (r / (H * T)) * T + r % T, qo = ((r / T) % H) * hs;
        dq_row<Real>(r, T, C, H, scale, qkv, att, dout, dqkv, dqkv(nq, qo));
      });
}

}  // namespace attention_order
}  // namespace minipipe
