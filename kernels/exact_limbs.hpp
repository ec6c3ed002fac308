// Exact fixed-point accumulators as 32-bit limbs held in int64: the form in which per-replica
// gradient sums are added by an integer all-reduce (MPI_SUM on int64) and folded back, exactly.
#pragma once

#include "exact_sum.hpp"

namespace minipipe {

// x = hi * 2^64 + lo splits into limbs l0..l3 of 32 bits (l3 signed). A sum of up to 2^31 such
// limb vectors fits int64 in every limb, so the all-reduce itself cannot overflow; folding the
// carries back and checking that the top limb fits recovers the exact 128-bit sum.
using LimbView = Kokkos::View<std::int64_t*, Kokkos::LayoutRight, MemSpace>;

struct ExactLimbs {
  static constexpr int kLimbs = 4;

  // limbs(4 e + k) = limb k of acc(e), for e in [first, first + n).
  static void pack(const ExactView& acc, std::size_t first, std::size_t n, const LimbView& limbs) {
    Kokkos::parallel_for(
        "ExactLimbs::pack", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const std::size_t i) {
          const Fixed128 x = acc(first + i);
          const std::uint64_t hi = static_cast<std::uint64_t>(x.hi);
          limbs(4 * i + 0) = static_cast<std::int64_t>(x.lo & 0xffffffffu);
          limbs(4 * i + 1) = static_cast<std::int64_t>(x.lo >> 32);
          limbs(4 * i + 2) = static_cast<std::int64_t>(hi & 0xffffffffu);
          limbs(4 * i + 3) = x.hi >> 32;  // arithmetic shift: the signed top limb
        });
  }

  // Four summed limbs folded back into one value with carries; `overflow` is set when the sum
  // leaves the signed 128-bit range. Limbs 0..2 are sums of non-negative 32-bit values, so the
  // shifts of non-negatives are exact.
  KOKKOS_INLINE_FUNCTION static Fixed128 fold(std::int64_t l0, std::int64_t l1, std::int64_t l2, std::int64_t l3,
                                              bool& overflow) {
    l1 += l0 >> 32;
    l0 &= 0xffffffff;
    l2 += l1 >> 32;
    l1 &= 0xffffffff;
    l3 += l2 >> 32;
    l2 &= 0xffffffff;
    overflow = l3 < -(std::int64_t(1) << 31) || l3 >= (std::int64_t(1) << 31);
    Fixed128 x;
    x.lo = (static_cast<std::uint64_t>(l1) << 32) | static_cast<std::uint64_t>(l0);
    x.hi = static_cast<std::int64_t>((static_cast<std::uint64_t>(l3) << 32) | static_cast<std::uint64_t>(l2));
    return x;
  }

  // acc(e) = the limb vector folded back with carries; sets overflow when the sum leaves the
  // signed 128-bit range.
  static void unpack(const LimbView& limbs, std::size_t first, std::size_t n, const ExactView& acc,
                     const FlagView& overflow) {
    Kokkos::parallel_for(
        "ExactLimbs::unpack", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const std::size_t i) {
          bool over = false;
          acc(first + i) = fold(limbs(4 * i + 0), limbs(4 * i + 1), limbs(4 * i + 2), limbs(4 * i + 3), over);
          if (over) overflow() = 1;
        });
  }
};

}  // namespace minipipe
