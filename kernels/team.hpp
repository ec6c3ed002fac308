// The one place device team kernels meet Kokkos' team API: a launch shape per kernel, the launch,
// and the team operations (rank, barrier, scratch, thread loops, reductions) a kernel body uses.
#pragma once

// A kernel body is a functor with `template <class M> KOKKOS_INLINE_FUNCTION void operator()(const M&
// team) const` that reaches the team only through the functions below. For a Kokkos member they
// forward inline to Kokkos; a test build (MINIPIPE_TEAM_SIM, host backends only) adds the same
// functions for the simulated member of team_sim.hpp, which runs a body at a GPU build's launch
// shape on host threads with a real barrier, poisoned and bounds-checked scratch (docs/device-path.md,
// "Launch shapes in CI"). Functors, not generic lambdas: nvcc accepts no generic extended lambda.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "types.hpp"

#if defined(MINIPIPE_TEAM_SIM) && !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP) && \
    !defined(KOKKOS_ENABLE_SYCL)
#define MINIPIPE_TEAM_SIM_ON 1
#endif

namespace minipipe {
namespace team {

// Whose launch shape a shape function returns: this host backend's (team of Kokkos::AUTO threads,
// one on Serial and OpenMP) or a GPU build's (CUDA, HIP: the team sizes written in each kernel).
enum class Target { host, gpu };

constexpr bool kHostBackend = std::is_same<ExecSpace::memory_space, Kokkos::HostSpace>::value;
constexpr int kAuto = 0;
// Level-0 team scratch a GPU block gets by default (CUDA, HIP); the design bound is 40 KB.
constexpr std::size_t kGpuScratchLevel0 = 48 * 1024;

// One launch: league teams of `team` threads (kAuto: Kokkos::AUTO) of `vector` lanes, `scratch`
// bytes of team scratch a team at `level`.
struct Shape {
  int league = 0;
  int team = kAuto;
  int vector = 1;
  int level = 0;
  std::size_t scratch = 0;
};

using Policy = Kokkos::TeamPolicy<ExecSpace>;
using Member = Policy::member_type;
template <class T>
using ScratchView = Kokkos::View<T*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Bytes of team scratch that a carve of n elements of T (team::scratch<T>(m, level, n)) needs.
template <class T>
std::size_t scratch_bytes(std::size_t n) {
  return ScratchView<T>::shmem_size(n);
}

// v, which a HIP device compile must take as formed anew by each team (elsewhere v itself). Kokkos
// runs a body in a loop over league ranks, and the compiler hoists out of that loop what the body
// derives from its members alone (a flag's test, TY * RM, rank % TX): each such value then holds
// registers through the whole body, a tested flag a 64-bit lane mask, two of the 102 scalar
// registers a gfx90a wave has (scripts/device_budgets.sh). What is derived from v stays where the
// body uses it. An empty asm (after a v_readfirstlane where v sat in a vector register): no value
// changes, no bit moves. Only for a value uniform over the team.
KOKKOS_FORCEINLINE_FUNCTION int per_team(int v) {
#if defined(__HIP_DEVICE_COMPILE__)
  v = __builtin_amdgcn_readfirstlane(v);
  asm volatile("" : "+s"(v));
#endif
  return v;
}

// ---- team operations on a Kokkos member (inline; no cost over calling Kokkos directly) ----------
KOKKOS_FORCEINLINE_FUNCTION int rank(const Member& m) {
  return m.team_rank();
}
KOKKOS_FORCEINLINE_FUNCTION int size(const Member& m) {
  return m.team_size();
}
KOKKOS_FORCEINLINE_FUNCTION int league(const Member& m) {
  return m.league_rank();
}
KOKKOS_FORCEINLINE_FUNCTION void barrier(const Member& m) {
  m.team_barrier();
}
// The team's next n elements of T of scratch at `level` (every thread carves the same sequence).
// Kokkos is asked for a constant level: indexed by a run-time level, its per-level scratch array
// went to the stack on gfx90a (24 B a lane in every attention body; scripts/device_budgets.sh).
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T* scratch(const Member& m, int level, std::size_t n) {
  if (level == 0) return ScratchView<T>(m.team_scratch(0), n).data();
  return ScratchView<T>(m.team_scratch(1), n).data();
}
// The same as a plain pointer, for host-path bodies that hand scratch to host SIMD helpers (the
// simulated executor checks the carve, not each access).
template <class T>
KOKKOS_FORCEINLINE_FUNCTION T* scratch_ptr(const Member& m, int level, std::size_t n) {
  return scratch<T>(m, level, n);
}
// f(e) for e = 0..n-1 spread over the team's threads (TeamThreadRange).
template <class F>
KOKKOS_FORCEINLINE_FUNCTION void threads(const Member& m, int n, const F& f) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(m, n), f);
}
// f() once per team.
template <class F>
KOKKOS_FORCEINLINE_FUNCTION void single(const Member& m, const F& f) {
  Kokkos::single(Kokkos::PerTeam(m), f);
}
// Team reductions of fast mode (order unspecified): f(e, acc) over e = 0..n-1, every thread gets
// the result.
template <class T, class F>
KOKKOS_FORCEINLINE_FUNCTION T sum(const Member& m, int n, const F& f) {
  T s = 0;
  Kokkos::parallel_reduce(Kokkos::TeamThreadRange(m, n), f, s);
  return s;
}
template <class T, class F>
KOKKOS_FORCEINLINE_FUNCTION T max(const Member& m, int n, const F& f) {
  T r;
  Kokkos::parallel_reduce(Kokkos::TeamThreadRange(m, n), f, Kokkos::Max<T>(r));
  return r;
}

}  // namespace team
}  // namespace minipipe

#ifdef MINIPIPE_TEAM_SIM_ON
#include "team_sim.hpp"
#endif

namespace minipipe {
namespace team {

// The target whose shapes launches take now: a GPU's while the simulated executor runs, else this build's.
inline Target launch_target() {
#ifdef MINIPIPE_TEAM_SIM_ON
  if (sim::active()) return Target::gpu;
#endif
  return kHostBackend ? Target::host : Target::gpu;
}

template <class Body>
struct KokkosBody {
  Body body;
  KOKKOS_FORCEINLINE_FUNCTION void operator()(const Member& m) const { body(m); }
};

// Teams of `threads` threads that one SM (CUDA) or CU (HIP) must hold for 25% theoretical
// occupancy, the hot kernels' target (docs/device-path.md): sm_90 16 of its 64 warps of 32; gfx90a
// 8 of its 32 wave slots of 64 (8 a SIMD, 4 SIMDs).
constexpr unsigned quarter_occupancy_teams(unsigned threads) {
#if defined(KOKKOS_ENABLE_HIP)
  constexpr unsigned wave = 64, slots = 8;
#else
  constexpr unsigned wave = 32, slots = 16;
#endif
  const unsigned per_team = (threads + wave - 1) / wave;
  return (slots + per_team - 1) / per_team;
}

// Kokkos::LaunchBounds' second argument for MinTeams resident teams of MaxThreads threads. CUDA reads
// it as blocks per SM; HIP's __launch_bounds__ passes it on as amdgpu_waves_per_eu, waves per SIMD
// (Kokkos' HIP block-size deduction reads it so too), so a team of w waves needs MinTeams x w / 4.
constexpr unsigned launch_bounds_min(unsigned max_threads, unsigned min_teams) {
#if defined(KOKKOS_ENABLE_HIP)
  return min_teams == 0 ? 0u : (min_teams * ((max_threads + 63) / 64) + 3) / 4;
#else
  (void)max_threads;
  return min_teams;
#endif
}

// Kokkos::LaunchBounds for MinTeams resident teams (blocks) of MaxThreads threads, on either GPU.
template <unsigned MaxThreads, unsigned MinTeams>
using LaunchBounds = Kokkos::LaunchBounds<MaxThreads, launch_bounds_min(MaxThreads, MinTeams)>;

// Runs body on every team of `s` (Kokkos, or the simulated executor when it is on). MaxThreads and
// MinTeams become Kokkos::LaunchBounds (0: none): a GPU compiler then keeps a thread within the
// registers that MinTeams resident teams of MaxThreads threads leave it (scripts/device_budgets.sh).
// Without them (0, 0) a HIP kernel is compiled for 1024-thread workgroups: at most 128 VGPRs.
template <unsigned MaxThreads = 0, unsigned MinTeams = 0, class Body>
void launch(const char* label, const Shape& s, const Body& body) {
  using Bounded = Kokkos::TeamPolicy<ExecSpace, LaunchBounds<MaxThreads, MinTeams>>;
  static_assert(std::is_same<typename Bounded::member_type, Member>::value, "launch bounds change no member type");
  if (MaxThreads != 0 && s.team > static_cast<int>(MaxThreads))  // a GPU refuses the launch
    throw std::invalid_argument(std::string(label) + ": team of " + std::to_string(s.team) +
                                " threads, above the kernel's launch bound of " + std::to_string(MaxThreads));
#ifdef MINIPIPE_TEAM_SIM_ON
  if (sim::active()) {
    sim::run(label, s, body);
    return;
  }
#endif
  Bounded p = s.team == kAuto
                  ? (s.vector == 1 ? Bounded(s.league, Kokkos::AUTO) : Bounded(s.league, Kokkos::AUTO, s.vector))
                  : (s.vector == 1 ? Bounded(s.league, s.team) : Bounded(s.league, s.team, s.vector));
  if (s.scratch > 0) p.set_scratch_size(s.level, Kokkos::PerTeam(s.scratch));
  Kokkos::parallel_for(label, p, KokkosBody<Body>{body});
}

}  // namespace team
}  // namespace minipipe
