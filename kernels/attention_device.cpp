// Device path of causal attention: teams of one (b, h, query or key block) with T-independent
// level-0 scratch tiles; each element keeps the host path's chain (see attention.cpp's header).
//
// Forward in two launches, a team per (b, h, QB queries) each: Q tile in scratch; per key tile,
// scores by a thread per (query, key); the softmax's max and sum by the whole team over every lane
// of the block's rows (row_reduce.hpp's team_reduce_rows: canonical lanes, the tree one level at a
// time), each exp formed by the lane that adds it, the division by a thread per element; then out
// by a thread per (query, channel) over V tiles, its accumulator in scratch between tiles. It stores att(t, t2)
// for t2 <= t only: the masked upper triangle is never written and never read (the backward reads
// keys t2 <= t alone; a dump that shows att writes those entries as 0 itself). Backward in three
// launches: rowdot's lanes by a thread per (query, key) of each key tile, then the lane tree across
// the team (parked in dqkv's first q entry of the row, as the host row kernels do), dk/dv per key
// block over query tiles, dq per query block over key tiles; datt and dpre are recomputed per tile
// (the same values) instead of being stored for the head. Scratch rows use the odd pitch hs + 1.
#include "attention_device.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "detmath.hpp"
#include "row_reduce.hpp"
#include "team.hpp"

namespace minipipe {
namespace attention_device {
namespace {

// Tile sizes: at head size 64 no kernel's tiles take more than 27012 bytes of team scratch (float;
// double 25992), so two 256-thread teams with Kokkos' own 2 KB share a gfx90a CU's 64 KB of LDS (4
// waves a team, 2 a SIMD: 25% occupancy); float's 32 x 32 forward tiles took 33 KB, one team a CU.
// A tile decides which elements a thread computes, never an element's chain: no bit depends on it.
template <class Real>
struct Tiles {
  static constexpr int kQ = int(128 / sizeof(Real));  // query rows per team (forward, rowdot, dq)
  static constexpr int kK = int(64 / sizeof(Real));   // keys per tile (forward, rowdot)
  static constexpr int kKB = int(64 / sizeof(Real));  // keys per team (dk/dv) and per tile (dq)
  static constexpr int kQD = int(64 / sizeof(Real));  // query rows per tile (dk/dv)
};

// Teams of kGpuTeam threads an SM / CU must hold at once (Kokkos::LaunchBounds): 25% occupancy.
constexpr unsigned kMinTeams = team::quarter_occupancy_teams(kGpuTeam);

using Policy = Kokkos::TeamPolicy<ExecSpace>;
template <class Real>
using Scratch = team::ScratchView<Real>;

// Scratch elements of each kernel (carved in this order in the kernels below).
template <class Real>
int forward_elems(int hs) {  // qs, ks, mx, rd
  using Tl = Tiles<Real>;
  return Tl::kQ * (hs + 1) + Tl::kK * (hs + 1) + Tl::kQ + Tl::kQ * rowred::kLanes;
}
template <class Real>
int out_elems(int hs) {  // vs, ps, acc
  using Tl = Tiles<Real>;
  return Tl::kK * (hs + 1) + Tl::kQ * Tl::kK + Tl::kQ * hs;
}
template <class Real>
int rowdot_elems(int hs) {  // ds, vs, ps, rd (QB x lanes)
  using Tl = Tiles<Real>;
  return Tl::kQ * (hs + 1) + Tl::kK * (hs + 1) + Tl::kQ * Tl::kK + Tl::kQ * rowred::kLanes;
}
template <class Real>
int dkv_elems(int hs) {  // vs, qs, ds, ps, as, rd, dk, dv
  using Tl = Tiles<Real>;
  return Tl::kKB * (hs + 1) + 2 * Tl::kQD * (hs + 1) + 2 * Tl::kQD * Tl::kKB + Tl::kQD + 2 * Tl::kKB * hs;
}
template <class Real>
int dq_elems(int hs) {  // ds, ks, vs, ps, rd, acc
  using Tl = Tiles<Real>;
  return Tl::kQ * (hs + 1) + 2 * Tl::kKB * (hs + 1) + Tl::kQ * Tl::kKB + Tl::kQ + Tl::kQ * hs;
}

// The launch shape of every attention kernel: GPU, kGpuTeam threads a team, the tiles in level-0 scratch
// when they fit a GPU block's default shared memory (always at GPT-2 head sizes), else level 1; host
// backend, Kokkos::AUTO threads and level 0 when this backend's level 0 holds them.
team::Shape attention_shape(team::Target target, int league, std::size_t bytes, const char* where) {
  team::Shape s;
  s.league = league;
  s.team = target == team::Target::host ? team::kAuto : kGpuTeam;
  s.scratch = bytes;
  const std::size_t max0 =
      target == team::Target::gpu ? team::kGpuScratchLevel0 : static_cast<std::size_t>(Policy::scratch_size_max(0));
  if (bytes <= max0) {
    s.level = 0;
  } else if (bytes <= static_cast<std::size_t>(Policy::scratch_size_max(1))) {
    s.level = 1;
  } else {
    throw std::invalid_argument(std::string(where) + ": the head's tiles need " + std::to_string(bytes) +
                                " bytes of team scratch, more than this backend offers");
  }
  return s;
}

// What every attention kernel body reads besides its own views.
template <class Real>
struct Common {
  int T, C, H, hs, nqb, nkb, level, n_el;
  Real scale;
  CMat<Real> qkv;
};

template <class Real>
struct ForwardBody {
  Common<Real> c;
  Mat<Real> att;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    [[maybe_unused]] constexpr int QB = Tiles<Real>::kQ, KB = Tiles<Real>::kK, KB2 = Tiles<Real>::kKB,
                                   L = rowred::kLanes;
    // The sizes formed per team (team::per_team): hoisted out of Kokkos' league loop, what the body
    // derives from them held scalar registers for the whole body beside det::exp's 9 double
    // constants, and gfx90a's 102 fell 2 short (SGPR spills; 93 SGPRs now).
    [[maybe_unused]] const int T = team::per_team(c.T), C = team::per_team(c.C), H = team::per_team(c.H),
                               hs = team::per_team(c.hs), ld = hs + 1, nqb = team::per_team(c.nqb), nkb = c.nkb,
                               level = team::per_team(c.level);
    [[maybe_unused]] const int n_el = team::per_team(c.n_el);
    [[maybe_unused]] const Real scale = c.scale;
    const CMat<Real>& qkv = c.qkv;
    const int bh = team::league(tm) / nqb;  // b*H + h
    const int b = bh / H, h = bh % H;
    const int t0 = team::league(tm) % nqb * QB;  // query rows t0..t0+nq-1
    const int nq = T - t0 < QB ? T - t0 : QB;
    const int kend = t0 + nq;  // keys 0..kend-1 are seen by some query of the block
    const int row0 = b * T, arow = bh * T;
    const int qo = h * hs, ko = C + h * hs;
    const auto qs = team::scratch<Real>(tm, level, n_el);  // (QB, ld)
    const auto ks = qs + QB * ld;                          // (KB, ld)
    const auto mx = ks + KB * ld;                          // (QB)
    const auto rd = mx + QB;                               // (QB, kLanes) lane partials
    team::threads(tm, nq * hs, [&](const int e) { qs[e / hs * ld + e % hs] = qkv(row0 + t0 + e / hs, qo + e % hs); });
    // scores: att(t, t2) = (fma chain over i of q_t[i] k_t2[i]) * scale, t2 <= t
    for (int k0 = 0; k0 < kend; k0 += KB) {
      const int kb = kend - k0 < KB ? kend - k0 : KB;
      team::barrier(tm);
      team::threads(tm, kb * hs, [&](const int e) { ks[e / hs * ld + e % hs] = qkv(row0 + k0 + e / hs, ko + e % hs); });
      team::barrier(tm);
      team::threads(tm, nq * KB, [&](const int e) {
        const int q = e / KB, j = e % KB;
        if (j >= kb || k0 + j > t0 + q) return;
        Real dot = 0;
        for (int i = 0; i < hs; ++i) dot = fma_exact(qs[q * ld + i], ks[j * ld + i], dot);
        att(arow + t0 + q, k0 + j) = dot * scale;
      });
    }
    team::barrier(tm);
    // softmax of rows t = t0 + q over keys t2 <= t: the max and the sum in the canonical lanes
    // and tree of row_reduce.hpp, the team's threads on all lanes of all rows (consecutive lanes
    // read consecutive keys); each exp is formed by the lane that adds it. Keys above the
    // diagonal are never written (nothing reads them).
    const auto len = [&](const int q) { return t0 + q + 1; };
    rowred::team_reduce_rows<rowred::Max, Real>(tm, rd, nq, len, [&](const int q, const int t2, const Real m) {
      return rowred::Max::combine<Real>(m, att(arow + t0 + q, t2));
    });
    team::threads(tm, nq, [&](const int q) { mx[q] = rd[q * L]; });
    team::barrier(tm);
    rowred::team_reduce_rows<rowred::Sum, Real>(tm, rd, nq, len, [&](const int q, const int t2, const Real a) {
      Real& x = att(arow + t0 + q, t2);
      x = det::exp(x - mx[q]);
      return a + x;
    });
    team::threads(tm, nq * kend, [&](const int e) {
      const int q = e / kend, t2 = e % kend;
      if (t2 <= t0 + q) att(arow + t0 + q, t2) = att(arow + t0 + q, t2) / rd[q * L];
    });
  }
};

// out_t[i] = fma chain over t2 = 0..t of att(t, t2) v_t2[i], a team per (b, h, QB queries) as in
// ForwardBody: its own launch, so that neither kernel holds the other's tiles and registers.
template <class Real>
struct OutBody {
  Common<Real> c;
  CMat<Real> att;
  Mat<Real> out;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    constexpr int QB = Tiles<Real>::kQ, KB = Tiles<Real>::kK;
    const int T = c.T, C = c.C, H = c.H, hs = c.hs, ld = c.hs + 1, nqb = c.nqb;
    const CMat<Real>& qkv = c.qkv;
    const int bh = team::league(tm) / nqb;  // b*H + h
    const int b = bh / H, h = bh % H;
    const int t0 = team::league(tm) % nqb * QB;  // query rows t0..t0+nq-1
    const int nq = T - t0 < QB ? T - t0 : QB;
    const int kend = t0 + nq;  // keys 0..kend-1 are seen by some query of the block
    const int row0 = b * T, arow = bh * T;
    const int qo = h * hs, vo = 2 * C + h * hs;
    const auto ks = team::scratch<Real>(tm, c.level, c.n_el);  // (KB, ld): V
    const auto ps = ks + KB * ld;                              // (QB, KB)
    const auto acc = ps + QB * KB;                             // (QB, hs)
    team::threads(tm, QB * hs, [&](const int e) { acc[e] = 0; });
    for (int k0 = 0; k0 < kend; k0 += KB) {
      const int kb = kend - k0 < KB ? kend - k0 : KB;
      team::barrier(tm);
      team::threads(tm, kb * hs, [&](const int e) { ks[e / hs * ld + e % hs] = qkv(row0 + k0 + e / hs, vo + e % hs); });
      team::threads(tm, nq * kb, [&](const int e) { ps[e / kb * KB + e % kb] = att(arow + t0 + e / kb, k0 + e % kb); });
      team::barrier(tm);
      team::threads(tm, nq * hs, [&](const int e) {
        const int q = e / hs, i = e % hs;
        const int last = t0 + q - k0 + 1;  // keys k0+j <= t
        const int jn = last < kb ? last : kb;
        Real o = acc[e];
        for (int j = 0; j < jn; ++j) o = fma_exact(ps[q * KB + j], ks[j * ld + i], o);
        acc[e] = o;
      });
    }
    // No barrier: a thread writes out only the accumulators it formed (the same thread loop).
    team::threads(tm, nq * hs, [&](const int e) { out(row0 + t0 + e / hs, qo + e % hs) = acc[e]; });
  }
};

template <class Real>
struct RowdotBody {
  Common<Real> c;
  CMat<Real> att, dout;
  Mat<Real> dqkv;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    [[maybe_unused]] constexpr int QB = Tiles<Real>::kQ, KB = Tiles<Real>::kK, KB2 = Tiles<Real>::kKB,
                                   L = rowred::kLanes;
    [[maybe_unused]] const int T = c.T, C = c.C, H = c.H, hs = c.hs, ld = c.hs + 1, nqb = c.nqb, nkb = c.nkb,
                               level = c.level;
    [[maybe_unused]] const int n_el = c.n_el;
    [[maybe_unused]] const Real scale = c.scale;
    const CMat<Real>& qkv = c.qkv;
    const int bh = team::league(tm) / nqb;
    const int b = bh / H, h = bh % H;
    const int t0 = team::league(tm) % nqb * QB;
    const int nq = T - t0 < QB ? T - t0 : QB;
    const int kend = t0 + nq;
    const int row0 = b * T, arow = bh * T;
    const int qo = h * hs, vo = 2 * C + h * hs;
    const auto ds = team::scratch<Real>(tm, level, n_el);  // (QB, ld)
    const auto vs = ds + QB * ld;                          // (KB, ld)
    const auto ps = vs + KB * ld;                          // (QB, KB)
    const auto rd = ps + QB * KB;                          // (QB, kLanes) lane partials
    team::threads(tm, nq * hs, [&](const int e) { ds[e / hs * ld + e % hs] = dout(row0 + t0 + e / hs, qo + e % hs); });
    team::threads(tm, QB * L, [&](const int e) { rd[e] = 0; });
    for (int k0 = 0; k0 < kend; k0 += KB) {
      const int kb = kend - k0 < KB ? kend - k0 : KB;
      team::barrier(tm);
      team::threads(tm, kb * hs, [&](const int e) { vs[e / hs * ld + e % hs] = qkv(row0 + k0 + e / hs, vo + e % hs); });
      team::barrier(tm);
      team::threads(tm, nq * KB, [&](const int e) {
        const int q = e / KB, j = e % KB;
        if (j >= kb || k0 + j > t0 + q) return;
        Real d = 0;
        for (int i = 0; i < hs; ++i) d = fma_exact(ds[q * ld + i], vs[j * ld + i], d);
        ps[e] = d;
      });
      // No barrier: the thread that formed ps[e] reads it (the same thread loop); the next tile's
      // load of vs waits at the barrier that opens the loop.
      // key k0 + j feeds lane (k0 + j) % kLanes; KB <= kLanes, so a lane gets one key per tile
      // and its chain runs in ascending t2 over the tiles
      team::threads(tm, nq * KB, [&](const int e) {
        const int q = e / KB, j = e % KB;
        if (j >= kb || k0 + j > t0 + q) return;
        Real& lane = rd[q * L + (k0 + j) % L];
        lane = fma_exact(att(arow + t0 + q, k0 + j), ps[e], lane);
      });
    }
    team::barrier(tm);
    // the lane tree of every row, one level at a time across the team
    rowred::team_tree_rows<rowred::Sum, Real>(tm, rd, nq);
    team::threads(tm, nq, [&](const int q) { dqkv(row0 + t0 + q, qo) = rd[q * L]; });
  }
};

template <class Real>
struct DkvBody {
  Common<Real> c;
  CMat<Real> att, dout;
  Mat<Real> dqkv;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    [[maybe_unused]] constexpr int QB = Tiles<Real>::kQ, KB = Tiles<Real>::kK, KB2 = Tiles<Real>::kKB,
                                   QD = Tiles<Real>::kQD, L = rowred::kLanes;
    [[maybe_unused]] const int T = c.T, C = c.C, H = c.H, hs = c.hs, ld = c.hs + 1, nqb = c.nqb, nkb = c.nkb,
                               level = c.level;
    [[maybe_unused]] const int n_el = c.n_el;
    [[maybe_unused]] const Real scale = c.scale;
    const CMat<Real>& qkv = c.qkv;
    const int bh = team::league(tm) / nkb;
    const int b = bh / H, h = bh % H;
    const int s0 = team::league(tm) % nkb * KB2;  // key rows s0..s0+nk-1
    const int nk = T - s0 < KB2 ? T - s0 : KB2;
    const int row0 = b * T, arow = bh * T;
    const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
    const auto vs = team::scratch<Real>(tm, level, n_el);  // (KB2, ld)
    const auto qs = vs + KB2 * ld;                         // (QD, ld)
    const auto ds = qs + QD * ld;                          // (QD, ld)
    const auto ps = ds + QD * ld;                          // (QD, KB2) dpre
    const auto as = ps + QD * KB2;                         // (QD, KB2) att
    const auto rd = as + QD * KB2;                         // (QD)
    const auto dk = rd + QD;                               // (KB2, hs)
    const auto dv = dk + KB2 * hs;                         // (KB2, hs)
    team::threads(tm, nk * hs, [&](const int e) { vs[e / hs * ld + e % hs] = qkv(row0 + s0 + e / hs, vo + e % hs); });
    team::threads(tm, KB2 * hs, [&](const int e) { dk[e] = dv[e] = 0; });
    for (int t0 = s0 / QD * QD; t0 < T; t0 += QD) {  // query tiles holding queries >= s0
      const int nq = T - t0 < QD ? T - t0 : QD;
      team::barrier(tm);
      team::threads(tm, nq * hs, [&](const int e) {
        qs[e / hs * ld + e % hs] = qkv(row0 + t0 + e / hs, qo + e % hs);
        ds[e / hs * ld + e % hs] = dout(row0 + t0 + e / hs, qo + e % hs);
      });
      team::threads(tm, nq, [&](const int q) { rd[q] = dqkv(row0 + t0 + q, qo); });
      team::barrier(tm);
      team::threads(tm, nq * KB2, [&](const int e) {
        const int q = e / KB2, j = e % KB2;
        if (j >= nk || s0 + j > t0 + q) return;
        Real d = 0;
        for (int i = 0; i < hs; ++i) d = fma_exact(ds[q * ld + i], vs[j * ld + i], d);
        const Real a = att(arow + t0 + q, s0 + j);
        ps[e] = (a * (d - rd[q])) * scale;
        as[e] = a;
      });
      team::barrier(tm);
      team::threads(tm, nk * hs, [&](const int e) {
        const int j = e / hs, i = e % hs;
        const int first = s0 + j - t0;  // queries t >= key s0+j
        Real gk = dk[e], gv = dv[e];
        for (int q = first > 0 ? first : 0; q < nq; ++q) {
          gk = fma_exact(ps[q * KB2 + j], qs[q * ld + i], gk);
          gv = fma_exact(as[q * KB2 + j], ds[q * ld + i], gv);
        }
        dk[e] = gk;
        dv[e] = gv;
      });
    }
    // No barrier: a thread writes out only the accumulators it formed (the same thread loop).
    team::threads(tm, nk * hs, [&](const int e) {
      dqkv(row0 + s0 + e / hs, ko + e % hs) = dk[e];
      dqkv(row0 + s0 + e / hs, vo + e % hs) = dv[e];
    });
  }
};

template <class Real>
struct DqBody {
  Common<Real> c;
  CMat<Real> att, dout;
  Mat<Real> dqkv;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    [[maybe_unused]] constexpr int QB = Tiles<Real>::kQ, KB = Tiles<Real>::kK, KB2 = Tiles<Real>::kKB,
                                   L = rowred::kLanes;
    [[maybe_unused]] const int T = c.T, C = c.C, H = c.H, hs = c.hs, ld = c.hs + 1, nqb = c.nqb, nkb = c.nkb,
                               level = c.level;
    [[maybe_unused]] const int n_el = c.n_el;
    [[maybe_unused]] const Real scale = c.scale;
    const CMat<Real>& qkv = c.qkv;
    const int bh = team::league(tm) / nqb;
    const int b = bh / H, h = bh % H;
    const int t0 = team::league(tm) % nqb * QB;
    const int nq = T - t0 < QB ? T - t0 : QB;
    const int kend = t0 + nq;
    const int row0 = b * T, arow = bh * T;
    const int qo = h * hs, ko = C + h * hs, vo = 2 * C + h * hs;
    const auto ds = team::scratch<Real>(tm, level, n_el);  // (QB, ld)
    const auto ks = ds + QB * ld;                          // (KB2, ld)
    const auto vs = ks + KB2 * ld;                         // (KB2, ld)
    const auto ps = vs + KB2 * ld;                         // (QB, KB2)
    const auto rd = ps + QB * KB2;                         // (QB)
    const auto acc = rd + QB;                              // (QB, hs)
    team::threads(tm, nq * hs, [&](const int e) {
      ds[e / hs * ld + e % hs] = dout(row0 + t0 + e / hs, qo + e % hs);
      acc[e] = 0;
    });
    team::threads(tm, nq, [&](const int q) { rd[q] = dqkv(row0 + t0 + q, qo); });
    for (int k0 = 0; k0 < kend; k0 += KB2) {
      const int kb = kend - k0 < KB2 ? kend - k0 : KB2;
      team::barrier(tm);
      team::threads(tm, kb * hs, [&](const int e) {
        ks[e / hs * ld + e % hs] = qkv(row0 + k0 + e / hs, ko + e % hs);
        vs[e / hs * ld + e % hs] = qkv(row0 + k0 + e / hs, vo + e % hs);
      });
      team::barrier(tm);
      team::threads(tm, nq * KB2, [&](const int e) {
        const int q = e / KB2, j = e % KB2;
        if (j >= kb || k0 + j > t0 + q) return;
        Real d = 0;
        for (int i = 0; i < hs; ++i) d = fma_exact(ds[q * ld + i], vs[j * ld + i], d);
        const Real a = att(arow + t0 + q, k0 + j);
        ps[e] = (a * (d - rd[q])) * scale;
      });
      team::barrier(tm);
      team::threads(tm, nq * hs, [&](const int e) {
        const int q = e / hs, i = e % hs;
        const int last = t0 + q - k0 + 1;
        const int jn = last < kb ? last : kb;
        Real g = acc[e];
        for (int j = 0; j < jn; ++j) g = fma_exact(ps[q * KB2 + j], ks[j * ld + i], g);
        acc[e] = g;
      });
    }
    // No barrier: a thread writes out only the accumulators it formed (the same thread loop).
    team::threads(tm, nq * hs, [&](const int e) { dqkv(row0 + t0 + e / hs, qo + e % hs) = acc[e]; });
  }
};
}  // namespace

template <class Real>
std::size_t forward_scratch_bytes(int hs) {
  return Scratch<Real>::shmem_size(std::max(forward_elems<Real>(hs), out_elems<Real>(hs)));
}

template <class Real>
std::size_t backward_scratch_bytes(int hs) {
  std::size_t n = static_cast<std::size_t>(rowdot_elems<Real>(hs));
  if (static_cast<std::size_t>(dkv_elems<Real>(hs)) > n) n = dkv_elems<Real>(hs);
  if (static_cast<std::size_t>(dq_elems<Real>(hs)) > n) n = dq_elems<Real>(hs);
  return Scratch<Real>::shmem_size(n);
}

template <class Real>
bool fits(int hs) {
  const std::size_t bytes = std::max(forward_scratch_bytes<Real>(hs), backward_scratch_bytes<Real>(hs));
  return bytes <= static_cast<std::size_t>(Policy::scratch_size_max(1)) ||
         bytes <= static_cast<std::size_t>(Policy::scratch_size_max(0));
}

template <class Real>
void forward(int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att, Mat<Real> out) {
  constexpr int QB = Tiles<Real>::kQ;
  const int hs = C / H;
  const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs));
  const int nqb = (T + QB - 1) / QB;
  const int n_el = forward_elems<Real>(hs);
  const std::size_t bytes = Scratch<Real>::shmem_size(n_el);
  const team::Shape shape =
      attention_shape(team::launch_target(), B * H * nqb, bytes, "Attention::forward (device path)");
  const Common<Real> c{T, C, H, hs, nqb, 0, shape.level, n_el, scale, qkv};
  team::launch<kGpuTeam, kMinTeams>("Attention::forward_device", shape, ForwardBody<Real>{c, att});
  // 2. out = att V, a team per (b, h, QB queries)
  const int n_out = out_elems<Real>(hs);
  const team::Shape out_shape = attention_shape(team::launch_target(), B * H * nqb, Scratch<Real>::shmem_size(n_out),
                                                "Attention::forward (device path)");
  const Common<Real> co{T, C, H, hs, nqb, 0, out_shape.level, n_out, scale, qkv};
  team::launch<kGpuTeam, kMinTeams>("Attention::forward_out_device", out_shape, OutBody<Real>{co, att, out});
}

template <class Real>
void backward_input(int B, int T, int C, int H, CMat<Real> qkv, CMat<Real> att, CMat<Real> dout, Mat<Real> dqkv) {
  constexpr int QB = Tiles<Real>::kQ, KB2 = Tiles<Real>::kKB;
  static_assert(Tiles<Real>::kK <= rowred::kLanes, "a rowdot key tile must not hold two keys of one lane");
  const int hs = C / H;
  const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs));
  const int nqb = (T + QB - 1) / QB, nkb = (T + KB2 - 1) / KB2;

  // 1. rowdot(t) = sum over t2 = 0..t of att(t,t2) datt(t,t2) in the canonical lanes (each lane an
  //    fma chain), datt = fma chain over i of dout_t[i] v_t2[i]; parked in dqkv(row of t, first q
  //    channel of the head).
  {
    const int n_el = rowdot_elems<Real>(hs);
    const std::size_t bytes = Scratch<Real>::shmem_size(n_el);
    const team::Shape shape =
        attention_shape(team::launch_target(), B * H * nqb, bytes, "Attention::backward_input (device path)");
    const Common<Real> c{T, C, H, hs, nqb, nkb, shape.level, n_el, scale, qkv};
    team::launch<kGpuTeam, kMinTeams>("Attention::backward_rowdot_device", shape, RowdotBody<Real>{c, att, dout, dqkv});
  }

  // 2. dk_t2[i] = fma chain over t = t2..T-1 of dpre(t,t2) q_t[i]; dv_t2[i] likewise of att(t,t2)
  //    dout_t[i]; dpre = (att (datt - rowdot)) * scale. One team per (b, h, KB2 keys).
  {
    const int n_el = dkv_elems<Real>(hs);
    const std::size_t bytes = Scratch<Real>::shmem_size(n_el);
    const team::Shape shape =
        attention_shape(team::launch_target(), B * H * nkb, bytes, "Attention::backward_input (device path)");
    const Common<Real> c{T, C, H, hs, nqb, nkb, shape.level, n_el, scale, qkv};
    team::launch<kGpuTeam, kMinTeams>("Attention::backward_dkv_device", shape, DkvBody<Real>{c, att, dout, dqkv});
  }

  // 3. dq_t[i] = fma chain over t2 = 0..t of dpre(t,t2) k_t2[i]. One team per (b, h, QB queries);
  //    it reads the rows' parked rowdot before it overwrites them.
  {
    const int n_el = dq_elems<Real>(hs);
    const std::size_t bytes = Scratch<Real>::shmem_size(n_el);
    const team::Shape shape =
        attention_shape(team::launch_target(), B * H * nqb, bytes, "Attention::backward_input (device path)");
    const Common<Real> c{T, C, H, hs, nqb, nkb, shape.level, n_el, scale, qkv};
    team::launch<kGpuTeam, kMinTeams>("Attention::backward_dq_device", shape, DqBody<Real>{c, att, dout, dqkv});
  }
}

template bool fits<float>(int);
template bool fits<double>(int);
template std::size_t forward_scratch_bytes<float>(int);
template std::size_t forward_scratch_bytes<double>(int);
template std::size_t backward_scratch_bytes<float>(int);
template std::size_t backward_scratch_bytes<double>(int);
template void forward<float>(int, int, int, int, CMat<float>, Mat<float>, Mat<float>);
template void forward<double>(int, int, int, int, CMat<double>, Mat<double>, Mat<double>);
template void backward_input<float>(int, int, int, int, CMat<float>, CMat<float>, CMat<float>, Mat<float>);
template void backward_input<double>(int, int, int, int, CMat<double>, CMat<double>, CMat<double>, Mat<double>);

}  // namespace attention_device
}  // namespace minipipe
