// Host rows of exact accumulators: acc[j] += v[j] over the contiguous channels of one row, with the
// bits and the overflow flag of ExactSum::add per element, vectorized across the channels.
#pragma once

#include <cstdint>

#include "exact_sum.hpp"
#include "host_simd.hpp"

namespace minipipe {
namespace exact_row {

// acc[j] += v[j] exactly for j < n, with ExactSum::add(acc[j], double(v[j]), ov)'s bits and overflow
// rule (host code: the callers' host paths only). Generic form: that call per element.
template <class Real>
inline void add(Fixed128* acc, const Real* v, int n, int& ov) {
  for (int j = 0; j < n; ++j) ExactSum::add(acc[j], static_cast<double>(v[j]), ov);
}

// float: a pass that forms each value's 128-bit fixed-point word from its limb word (float_limb: the
// word from_double gives, |w 2^(32 j)| < 2^126; 0 and a flag where from_double overflows), branch-free
// so that it vectorizes across the channels, then the plain 128-bit adds (ExactSum::add).
// from_double's rint, floor and conversions per element made the deterministic host path about
// 4x slower than fast mode's float adds.
template <>
inline void add<float>(Fixed128* acc, const float* v, int n, int& ov) {
  constexpr int kChunk = 64;
  for (int j0 = 0; j0 < n; j0 += kChunk) {
    const int m = n - j0 < kChunk ? n - j0 : kChunk;
    std::uint64_t lo[kChunk], hi[kChunk];
    std::int64_t bad = 0;
    for (int l = 0; l < m; ++l) {
      std::int64_t w, j, bd;
      ExactSum::float_limb(v[j0 + l], w, j, bd);
      const std::uint64_t uw = static_cast<std::uint64_t>(w);
      const std::uint64_t sx = static_cast<std::uint64_t>(w >> 63);  // the sign extension
      // w 2^(32 j) in two's complement: (lo, hi) = (w, sx), (w << 32, w >> 32), (0, w), (0, w << 32).
      lo[l] = j == 0 ? uw : (j == 1 ? uw << 32 : 0u);
      hi[l] = j == 0 ? sx : (j == 1 ? static_cast<std::uint64_t>(w >> 32) : (j == 2 ? uw : uw << 32));
      bad |= bd;
    }
    if (bad) ov = 1;
    int l = 0;
#ifdef MINIPIPE_HOST_AVX512
    // Eight accumulators a step: ExactSum::add's operations lane-wise (the carry out of the low
    // words, the signed overflow test of the high words), the (lo, hi) pairs split and rejoined.
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i join_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i join_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    __mmask8 over = 0;
    for (; l + 8 <= m; l += 8) {
      std::uint64_t* const a = &acc[j0 + l].lo;  // Fixed128 is {lo, hi}: 16 consecutive words
      const __m512i p0 = _mm512_loadu_si512(a), p1 = _mm512_loadu_si512(a + 8);
      const __m512i alo = _mm512_permutex2var_epi64(p0, even, p1), ahi = _mm512_permutex2var_epi64(p0, odd, p1);
      const __m512i xlo = _mm512_loadu_si512(lo + l), xhi = _mm512_loadu_si512(hi + l);
      const __m512i slo = _mm512_add_epi64(alo, xlo);
      const __mmask8 carry = _mm512_cmplt_epu64_mask(slo, alo);
      const __m512i shi =
          _mm512_mask_add_epi64(_mm512_add_epi64(ahi, xhi), carry, _mm512_add_epi64(ahi, xhi), _mm512_set1_epi64(1));
      const __m512i sflip = _mm512_and_si512(_mm512_xor_si512(ahi, shi), _mm512_xor_si512(xhi, shi));
      over |= _mm512_movepi64_mask(sflip);  // the sign bit of each lane
      _mm512_storeu_si512(a, _mm512_permutex2var_epi64(slo, join_lo, shi));
      _mm512_storeu_si512(a + 8, _mm512_permutex2var_epi64(slo, join_hi, shi));
    }
    if (over) ov = 1;
#endif
    for (; l < m; ++l) {
      Fixed128 x;
      x.lo = lo[l];
      x.hi = static_cast<std::int64_t>(hi[l]);
      ExactSum::add(acc[j0 + l], x, ov);
    }
  }
}

}  // namespace exact_row
}  // namespace minipipe
