// Test-only executor of device team kernels at a GPU build's launch shape on a host backend: each
// team's threads run as fibers in a fixed phased order, with a real barrier, poisoned scratch.
#pragma once

// Why: a Serial (or OpenMP AUTO) team has one thread, so barriers, team reductions and shared
// scratch never meet a second thread there. Here a team of T threads runs one thread at a time: a
// thread runs until it reaches a barrier (or the body's end) and hands over to the next, so a
// missing barrier lets a thread run ahead and read scratch its peers have not written yet (0xFF
// bytes: NaN) or have already overwritten, deterministically. Each launch runs with the threads in
// order 0..T-1 or in reverse order (set / MINIPIPE_TEST_TEAM_SIM). Every scratch carve is checked
// against the team's request and every scratch access against its carve; a request above a GPU's
// level-0 limit, a barrier not reached by every thread and a Kokkos::AUTO team (no GPU shape) fail
// the launch with std::runtime_error. Teams of a league run one after the other (races between teams
// are not modelled). Compiled only in test builds on host backends (kernels/team.hpp).

#include <cstddef>
#include <functional>
#include <string>

namespace minipipe {
namespace team {

struct Shape;

namespace sim {

enum class Order { forward, reverse };

// On / off and the thread order. The initial value comes from MINIPIPE_TEST_TEAM_SIM: unset or
// empty: off; "gpu": on, threads 0..T-1; "gpu-reverse": on, threads T-1..0 (else invalid_argument).
bool active();
Order order();
void set(bool on, Order order = Order::forward);
// Launches run by the executor since the process started (tests check that it ran).
long launches();

struct Run;  // one launch's state (team_sim.cpp)

[[noreturn]] void fail_access(const Run* run, std::ptrdiff_t index, std::ptrdiff_t n);

// A pointer into a team's scratch carve that checks every access against the carve.
template <class T>
class Checked {
 public:
  Checked() = default;
  Checked(T* base, std::ptrdiff_t n, std::ptrdiff_t off, const Run* run) : base_(base), n_(n), off_(off), run_(run) {}
  template <class U>
  Checked(const Checked<U>& o) : base_(o.base_), n_(o.n_), off_(o.off_), run_(o.run_) {}  // T* -> const T*

  T& operator[](std::ptrdiff_t i) const {
    const std::ptrdiff_t j = off_ + i;
    if (j < 0 || j >= n_) fail_access(run_, j, n_);
    return base_[j];
  }
  T& operator*() const { return (*this)[0]; }
  Checked operator+(std::ptrdiff_t d) const { return Checked(base_, n_, off_ + d, run_); }
  Checked operator-(std::ptrdiff_t d) const { return Checked(base_, n_, off_ - d, run_); }

 private:
  template <class U>
  friend class Checked;
  T* base_ = nullptr;
  std::ptrdiff_t n_ = 0, off_ = 0;
  const Run* run_ = nullptr;
};

// The member a body sees: its team (league rank), its thread rank and the team size.
struct Member {
  Run* run;
  int league, rank, size;
};

void barrier(const Member& m);
// Carves `bytes` (the scratch_bytes of n elements) from the team's scratch at `level`; returns the
// carve's start. Fails the launch when the request is smaller than the carves.
void* carve(const Member& m, int level, std::size_t bytes, std::size_t align);
// T slots per thread for team reductions (poisoned, like scratch).
void* reduce_slots(const Member& m);

void run_erased(const char* label, const Shape& s, const std::function<void(const Member&)>& body);

template <class Body>
void run(const char* label, const Shape& s, const Body& body) {
  run_erased(label, s, [&body](const Member& m) { body(m); });
}

}  // namespace sim

// ---- the team operations of team.hpp for the simulated member ---------------------------------
inline int rank(const sim::Member& m) {
  return m.rank;
}
inline int size(const sim::Member& m) {
  return m.size;
}
inline int league(const sim::Member& m) {
  return m.league;
}
inline void barrier(const sim::Member& m) {
  sim::barrier(m);
}
template <class T>
sim::Checked<T> scratch(const sim::Member& m, int level, std::size_t n) {
  T* p = static_cast<T*>(sim::carve(m, level, scratch_bytes<T>(n), alignof(T)));
  return sim::Checked<T>(p, static_cast<std::ptrdiff_t>(n), 0, m.run);
}
template <class T>
T* scratch_ptr(const sim::Member& m, int level, std::size_t n) {
  return static_cast<T*>(sim::carve(m, level, scratch_bytes<T>(n), alignof(T)));
}
// TeamThreadRange as CUDA spreads it with vector length 1: thread r takes r, r + T, r + 2T, ...
template <class F>
void threads(const sim::Member& m, int n, const F& f) {
  for (int e = m.rank; e < n; e += m.size) f(e);
}
template <class F>
void single(const sim::Member& m, const F& f) {
  if (m.rank == 0) f();
}
// Each thread's partial over its strided indices, combined in rank order after a barrier.
template <class T, class Init, class Combine, class F>
T reduce_in_rank_order(const sim::Member& m, int n, Init init, Combine combine, const F& f) {
  T part = init();
  for (int e = m.rank; e < n; e += m.size) f(e, part);
  T* slots = static_cast<T*>(sim::reduce_slots(m));
  slots[m.rank] = part;
  sim::barrier(m);
  T r = init();
  for (int i = 0; i < m.size; ++i) r = combine(r, slots[i]);
  sim::barrier(m);
  return r;
}
template <class T, class F>
T sum(const sim::Member& m, int n, const F& f) {
  return reduce_in_rank_order<T>(
      m, n, [] { return T(0); }, [](T a, T b) { return a + b; }, f);
}
template <class T, class F>
T max(const sim::Member& m, int n, const F& f) {
  return reduce_in_rank_order<T>(
      m, n, [] { return Kokkos::reduction_identity<T>::max(); }, [](T a, T b) { return b > a ? b : a; }, f);
}

}  // namespace team
}  // namespace minipipe
