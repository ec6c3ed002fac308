// The one canonical order of miniPipe's row reductions (LayerNorm, cross-entropy): 32 strided lane
// chains combined by a fixed pairwise tree, computed alike by host SIMD loops and GPU team kernels.
#pragma once

#include "team.hpp"
#include "types.hpp"

namespace minipipe {
namespace rowred {

// Lane l (l < kLanes) runs the chain over the indices c = l, l + kLanes, l + 2 kLanes, ... < n in
// ascending order, starting from the identity; then, for w = 16, 8, 4, 2, 1 and l < w,
// p[l] = combine(p[l], p[l + w]). The order depends on n only: a host loop vectorises across the
// lanes, a GPU team gives each lane a thread (consecutive threads read consecutive addresses), and
// both form the same partials and the same tree.
constexpr int kLanes = 32;

struct Sum {
  template <class T>
  KOKKOS_FORCEINLINE_FUNCTION static T identity() {
    return T(0);
  }
  template <class T>
  KOKKOS_FORCEINLINE_FUNCTION static T combine(T lo, T hi) {
    return lo + hi;
  }
};

// Ties keep the lower-index operand, so the tree finds the first maximal element like a forward scan.
struct Max {
  template <class T>
  KOKKOS_FORCEINLINE_FUNCTION static T identity() {
    return Kokkos::reduction_identity<T>::max();
  }
  template <class T>
  KOKKOS_FORCEINLINE_FUNCTION static T combine(T lo, T hi) {
    return hi > lo ? hi : lo;
  }
};

template <class Op, class T>
KOKKOS_FORCEINLINE_FUNCTION T tree(T* p) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) p[l] = Op::template combine<T>(p[l], p[l + w]);
  return p[0];
}

// Host form: step(c, acc) returns the lane's next value after element c.
template <class Op, class T, class Step>
KOKKOS_FORCEINLINE_FUNCTION T reduce(int n, const Step& step) {
  T p[kLanes];
  for (int l = 0; l < kLanes; ++l) p[l] = Op::template identity<T>();
  int c0 = 0;
  for (; c0 + kLanes <= n; c0 += kLanes)
    for (int l = 0; l < kLanes; ++l) p[l] = step(c0 + l, p[l]);
  for (int l = 0; c0 + l < n; ++l) p[l] = step(c0 + l, p[l]);
  return tree<Op, T>(p);
}

// Team form: the same partials, one lane per team thread (team::threads over the lanes), parked
// in `scratch` (kLanes entries of team scratch); every thread then runs the tree on a private copy,
// so all threads return the same value. Ends with a barrier, so scratch may be reused at once.
template <class Op, class T, class Member, class P, class Step>
KOKKOS_INLINE_FUNCTION T team_reduce(const Member& tm, P scratch, int n, const Step& step) {
  team::threads(tm, kLanes, [&](const int l) {
    T a = Op::template identity<T>();
    for (int c = l; c < n; c += kLanes) a = step(c, a);
    scratch[l] = a;
  });
  team::barrier(tm);
  T p[kLanes];
  for (int l = 0; l < kLanes; ++l) p[l] = scratch[l];
  const T r = tree<Op, T>(p);
  team::barrier(tm);
  return r;
}

// The tree of team_reduce_rows alone, for lane partials already parked in p (rows x kLanes).
template <class Op, class T, class Member, class P>
KOKKOS_INLINE_FUNCTION void team_tree_rows(const Member& tm, P p, int rows) {
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    team::threads(tm, rows * w, [&](const int e) {
      const P q = p + e / w * kLanes;
      const int l = e % w;
      q[l] = Op::template combine<T>(q[l], q[l + w]);
    });
    team::barrier(tm);
  }
}

// Team form for several short rows at once (a query block's softmax rows): the team's threads run
// the lanes of every row side by side, lane (r, l) = step(r, c, acc) over c = l, l + kLanes, ... <
// n(r) from the identity, parked in p[r * kLanes + l] (rows x kLanes entries of team scratch); then
// the tree, one level at a time across the team (the pairs (l, l + w) of tree()). Row r's result
// is left in p[r * kLanes]; ends with a barrier. No thread walks a row alone.
template <class Op, class T, class Member, class P, class Len, class Step>
KOKKOS_INLINE_FUNCTION void team_reduce_rows(const Member& tm, P p, int rows, const Len& n, const Step& step) {
  team::threads(tm, rows * kLanes, [&](const int e) {
    const int r = e / kLanes, l = e % kLanes;
    const int len = n(r);
    T a = Op::template identity<T>();
    for (int c = l; c < len; c += kLanes) a = step(r, c, a);
    p[e] = a;
  });
  team::barrier(tm);
  team_tree_rows<Op, T>(tm, p, rows);
}

// Team size of the device-path row kernels: whatever a host backend offers (AUTO; 1 on Serial),
// one warp of lanes on a GPU.
inline int row_team(team::Target target) {
  return target == team::Target::host ? team::kAuto : kLanes;
}

// Launch bounds of the row kernels (team::launch<kLanes, kRowMinTeams>): teams of kLanes threads, as
// many resident as 25% occupancy needs. Unbounded, a HIP kernel is compiled for 1024-thread
// workgroups (at most 128 VGPRs), where LayerNorm's deterministic backward-input for double spilled.
constexpr unsigned kRowMinTeams = team::quarter_occupancy_teams(kLanes);

// The launch shape of a row kernel (LayerNorm, cross-entropy, both modes): a team per row, with
// `scratch` bytes of level-0 scratch a team.
inline team::Shape row_shape(team::Target target, int rows, std::size_t scratch) {
  team::Shape s;
  s.league = rows;
  s.team = row_team(target);
  s.scratch = scratch;
  return s;
}

}  // namespace rowred
}  // namespace minipipe
