// Test-only frozen copy of the original causal attention kernels (kernels/attention.cpp before
// the host optimisation). test_attention_bits.cpp checks that the production kernels reproduce
// these outputs bit for bit: the reduction chains below are the determinism contract (DESIGN.md §4).
// Do not optimise this file; it is the reference. One deliberate change since it was frozen: fast
// mode now uses det::exp like deterministic mode (libm exp was the slower one; issue 11), so the
// reference takes det::exp in both modes; deterministic bits are unchanged. A second one (issue
// 11): the softmax sum and rowdot, once single chains over t2, follow the canonical lane order of
// DESIGN.md §4 rule 1 (32 strided lanes, then the pairwise tree 16, 8, 4, 2, 1), written out
// below by hand rather than through kernels/row_reduce.hpp.
#pragma once

#include <stdexcept>
#include <string>

#include "kernels/detmath.hpp"
#include "kernels/types.hpp"

namespace minipipe::test {

inline void attention_reference_check_shapes(const char* where, int B, int T, int C, int H, std::size_t qkv_rows,
                                             std::size_t qkv_cols, std::size_t att_rows, std::size_t att_cols,
                                             std::size_t io_rows, std::size_t io_cols) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument(std::string(where) + ": " + what); };
  if (B <= 0 || T <= 0 || C <= 0 || H <= 0) fail("B, T, C, H must be positive");
  if (C % H != 0) fail("C = " + std::to_string(C) + " is not divisible by H = " + std::to_string(H));
  const std::size_t N = std::size_t(B) * std::size_t(T);
  if (qkv_rows != N || qkv_cols != 3 * std::size_t(C)) fail("qkv must be (B*T, 3C)");
  if (att_rows != N * std::size_t(H) || att_cols != std::size_t(T)) fail("att must be (B*H*T, T)");
  if (io_rows != N || io_cols != std::size_t(C)) fail("out/dout must be (B*T, C)");
}

template <class Real>
struct AttentionReference {
  static void forward(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att, Mat<Real> out);
  static void backward_input(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, CMat<Real> att, CMat<Real> dout,
                             Mat<Real> dqkv);
};

template <class Real>
inline void AttentionReference<Real>::forward(Mode mode, int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att,
                                              Mat<Real> out) {
  attention_reference_check_shapes("AttentionReference::forward", B, T, C, H, qkv.extent(0), qkv.extent(1),
                                   att.extent(0), att.extent(1), out.extent(0), out.extent(1));
  const int hs = C / H;
  const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs));
  (void)mode;  // both modes: det::exp
  Kokkos::parallel_for(
      "AttentionReference::forward", Kokkos::RangePolicy<ExecSpace>(0, B * H * T),
      KOKKOS_LAMBDA(const int r) {  // row r = (b*H + h)*T + t of att (B*H*T, T)
        const int b = r / (H * T);
        const int h = (r / T) % H;
        const int t = r % T;
        const int nq = b * T + t;
        const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
        // scores of the unmasked keys t2 <= t, kept in att until normalised
        Real mx = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const int nk = b * T + t2;
          Real dot = 0;
          for (int i = 0; i < hs; ++i) dot = fma_exact(qkv(nq, qo + i), qkv(nk, ko + i), dot);
          const Real s = dot * scale;
          att(r, t2) = s;
          mx = (t2 == 0 || s > mx) ? s : mx;
        }
        Real lane[32] = {};  // lane t2 % 32 sums its exps in ascending t2
        for (int t2 = 0; t2 <= t; ++t2) {
          const Real e = det::exp(att(r, t2) - mx);
          att(r, t2) = e;
          lane[t2 % 32] += e;
        }
        for (int w = 16; w >= 1; w /= 2)
          for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
        const Real sum = lane[0];
        for (int t2 = 0; t2 <= t; ++t2) att(r, t2) = att(r, t2) / sum;
        for (int t2 = t + 1; t2 < T; ++t2) att(r, t2) = 0;
        for (int i = 0; i < hs; ++i) {
          Real o = 0;
          for (int t2 = 0; t2 <= t; ++t2) o = fma_exact(att(r, t2), qkv(b * T + t2, vo + i), o);
          out(nq, qo + i) = o;
        }
      });
}

template <class Real>
inline void AttentionReference<Real>::backward_input(Mode mode, int B, int T, int C, int H, CMat<Real> qkv,
                                                     CMat<Real> att, CMat<Real> dout, Mat<Real> dqkv) {
  attention_reference_check_shapes("AttentionReference::backward_input", B, T, C, H, qkv.extent(0), qkv.extent(1),
                                   att.extent(0), att.extent(1), dout.extent(0), dout.extent(1));
  if (dqkv.extent(0) != qkv.extent(0) || dqkv.extent(1) != qkv.extent(1))
    throw std::invalid_argument("AttentionReference::backward_input: dqkv must be (B*T, 3C)");
  (void)mode;  // no transcendental functions in backward: both modes run the same loops
  const int hs = C / H;
  const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs));
  const int rows = B * H * T;
  // With datt(t,t2) = dout_t . v_t2 the softmax backward is
  //   dpre(t,t2) = att(t,t2) * (datt(t,t2) - rowdot(t)),  rowdot(t) = sum_t2 att(t,t2) datt(t,t2),
  // and dq_t = scale sum_t2 dpre k_t2, dk_t2 = scale sum_t dpre q_t, dv_t2 = sum_t att dout_t.
  // Each gradient row is owned by one thread (query rows for dq, key rows for dk/dv), so there
  // are no atomics and every sum has a fixed order. rowdot(t) is parked in the first dq entry
  // of its row (dqkv is overwritten anyway), which avoids a scratch allocation per call.
  Kokkos::parallel_for(
      "AttentionReference::backward_rowdot", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(const int r) {  // query row r = (b*H + h)*T + t
        const int b = r / (H * T);
        const int h = (r / T) % H;
        const int t = r % T;
        const int nq = b * T + t;
        const int qo = h * hs, vo = 2 * C + h * hs;
        Real lane[32] = {};  // lane t2 % 32: an fma chain in ascending t2
        for (int t2 = 0; t2 <= t; ++t2) {
          Real d = 0;
          for (int i = 0; i < hs; ++i) d = fma_exact(dout(nq, qo + i), qkv(b * T + t2, vo + i), d);
          lane[t2 % 32] = fma_exact(att(r, t2), d, lane[t2 % 32]);
        }
        for (int w = 16; w >= 1; w /= 2)
          for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
        dqkv(nq, qo) = lane[0];
      });
  Kokkos::parallel_for(
      "AttentionReference::backward_dkv", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(const int r) {  // key row r = (b*H + h)*T + t2
        const int b = r / (H * T);
        const int h = (r / T) % H;
        const int t2 = r % T;
        const int nk = b * T + t2;
        const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
        for (int i = 0; i < hs; ++i) {
          dqkv(nk, ko + i) = 0;
          dqkv(nk, vo + i) = 0;
        }
        for (int t = t2; t < T; ++t) {  // queries that see key t2
          const int rq = (b * H + h) * T + t;
          const int nq = b * T + t;
          const Real a = att(rq, t2);
          Real d = 0;
          for (int i = 0; i < hs; ++i) d = fma_exact(dout(nq, qo + i), qkv(nk, vo + i), d);
          const Real dp = (a * (d - dqkv(nq, qo))) * scale;
          for (int i = 0; i < hs; ++i) {
            dqkv(nk, ko + i) = fma_exact(dp, qkv(nq, qo + i), dqkv(nk, ko + i));
            dqkv(nk, vo + i) = fma_exact(a, dout(nq, qo + i), dqkv(nk, vo + i));
          }
        }
      });
  Kokkos::parallel_for(
      "AttentionReference::backward_dq", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(const int r) {  // query row r = (b*H + h)*T + t
        const int b = r / (H * T);
        const int h = (r / T) % H;
        const int t = r % T;
        const int nq = b * T + t;
        const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
        const Real rd = dqkv(nq, qo);  // parked by backward_rowdot; read before overwriting
        for (int i = 0; i < hs; ++i) dqkv(nq, qo + i) = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const int nk = b * T + t2;
          Real d = 0;
          for (int i = 0; i < hs; ++i) d = fma_exact(dout(nq, qo + i), qkv(nk, vo + i), d);
          const Real dp = (att(r, t2) * (d - rd)) * scale;
          for (int i = 0; i < hs; ++i) dqkv(nq, qo + i) = fma_exact(dp, qkv(nk, ko + i), dqkv(nq, qo + i));
        }
      });
}

}  // namespace minipipe::test
