// Host-only SIMD building blocks shared by the packed GEMM and the attention kernels. The device
// passes of nvcc and hipcc never see the intrinsics: MINIPIPE_HOST_AVX512 is defined only in a host
// pass of an AVX-512F build, so a KOKKOS_FUNCTION tests it to pick its host body.
#pragma once

// GCC's unrolling pragma for host loops. nvcc's front end (which also reads host-only code in a
// CUDA build) does not know it and would warn at every use, so it sees nothing there.
#define MINIPIPE_PRAGMA(x) _Pragma(#x)
#if defined(__CUDACC__)
#define MINIPIPE_HOST_UNROLL(n)
#else
#define MINIPIPE_HOST_UNROLL(n) MINIPIPE_PRAGMA(GCC unroll n)
#endif

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && defined(__AVX512F__)
// GCC 12 warns about the deliberately undefined pass-through operand inside some AVX-512
// intrinsics (GCC bug 105593); the warning points into the header, so it is silenced there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#define MINIPIPE_HOST_AVX512 1

#include <cstddef>
#include <cstdint>

#include "detmath.hpp"

namespace minipipe {
namespace host_simd {

// dst[k*ldd + i] = src[i][k] for k = 0..15 and i < n <= 16: a 16 x 16 transpose in registers
// (unpack ps, unpack pd, two rounds of 128-bit lane shuffles), each output row stored under a mask
// of its n lanes. The scalar loops it replaces in the packers stored one float at a time with a
// 48- or 128-byte stride. Every src[i] (i < n) must have 16 readable floats.
inline void transpose16(const float* const (&src)[16], int n, float* dst, int ldd) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = i < n ? _mm512_loadu_ps(src[i]) : _mm512_setzero_ps();
  __m512 t[16];
  for (int p = 0; p < 8; ++p) {
    t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
  }
  // v[g][c], 128-bit lane j: rows 4g..4g+3 at column 4j + c.
  __m512 v[4][4];
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    v[g][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    v[g][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    v[g][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    v[g][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  const __mmask16 lanes = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
  for (int c = 0; c < 4; ++c) {
    const __m512 s0 = _mm512_shuffle_f32x4(v[0][c], v[1][c], 0x44), s1 = _mm512_shuffle_f32x4(v[0][c], v[1][c], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(v[2][c], v[3][c], 0x44), s3 = _mm512_shuffle_f32x4(v[2][c], v[3][c], 0xEE);
    _mm512_mask_storeu_ps(dst + static_cast<std::ptrdiff_t>(c) * ldd, lanes, _mm512_shuffle_f32x4(s0, s2, 0x88));
    _mm512_mask_storeu_ps(dst + static_cast<std::ptrdiff_t>(4 + c) * ldd, lanes, _mm512_shuffle_f32x4(s0, s2, 0xDD));
    _mm512_mask_storeu_ps(dst + static_cast<std::ptrdiff_t>(8 + c) * ldd, lanes, _mm512_shuffle_f32x4(s1, s3, 0x88));
    _mm512_mask_storeu_ps(dst + static_cast<std::ptrdiff_t>(12 + c) * ldd, lanes, _mm512_shuffle_f32x4(s1, s3, 0xDD));
  }
}

// det::exp_normal of 16 floats in exp_normal_range, every lane its bits, in fewer operations than
// detmath.hpp's sequence (reduce_ln2, expm1_tail, fast_two_sum, the final sum): hi = x - k kLn2Hi
// as one fused step (k kLn2Hi is exact, so both forms round once, the same way); r and rl by
// fast_two_sum(hi, -lo) where reduce_ln2 has two_sum (Dekker's bound |hi| >= |lo| fails on 11994
// floats of the range, yet the pair comes out the same there too, as on every float of the range:
// checked, not proved); v * 2^k through VSCALEFPS where exp_normal builds 2^k from its bits and
// multiplies (v * 2^k is normal there: both products are exact). test_detmath_bits compares every
// float of the range with det::exp_normal. Written out so that the softmax's exp-and-sum loop keeps
// its lanes in registers: 23 vector operations, where the literal sequence takes 28.
inline __m512 exp_normal16(__m512 x) {
  using Tr = det::detail::Traits<float>;
  const __m512 magic = _mm512_set1_ps(Tr::kRoundMagic);
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(Tr::kInvLn2), magic);
  const __m512 kf = _mm512_sub_ps(t, magic);
  const __m512 hi = _mm512_fnmadd_ps(kf, _mm512_set1_ps(Tr::kLn2Hi), x);  // kf kLn2Hi is exact
  const __m512 lo = _mm512_mul_ps(kf, _mm512_set1_ps(Tr::kLn2Lo));
  const __m512 r = _mm512_sub_ps(hi, lo);
  const __m512 rl = _mm512_sub_ps(_mm512_sub_ps(hi, r), lo);
  __m512 p = _mm512_set1_ps(1.0f / 40320.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 5040.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  const __m512 tt = _mm512_mul_ps(_mm512_mul_ps(r, r), p);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 s = _mm512_add_ps(one, r);
  const __m512 se = _mm512_sub_ps(r, _mm512_sub_ps(s, one));
  const __m512 v = _mm512_add_ps(s, _mm512_add_ps(se, _mm512_add_ps(tt, _mm512_mul_ps(rl, s))));
  return _mm512_scalef_ps(v, kf);
}

// Fast mode's exp of 16 floats in exp_normal_range: 2^k e^r with k = rint(x / ln2), r = x - k ln2
// (two fused steps), e^r by its Taylor polynomial to r^7 (|r| <= ln2/2: truncation below 2^-26
// relative): about an ulp from det::exp, at a third of its operations. det::exp_coarse is the same
// steps per float (its rint and p 2^k are this roundscale and scalef), for element-wise kernels;
// test_detmath_bits compares every float of exp_normal_range.
inline __m512 exp_fast16(__m512 x) {
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0x1.62e430p-1f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-0x1.05c610p-29f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

}  // namespace host_simd
}  // namespace minipipe
#endif
