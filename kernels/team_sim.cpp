// The simulated team executor of team_sim.hpp: a team's threads as ucontext fibers switched at
// barriers in a fixed order, scratch poisoned per team and checked per carve and per access.
// Fortified longjmp refuses a jump to another stack; the jumps here go between fiber stacks.
#undef _FORTIFY_SOURCE
#include "team.hpp"

#ifdef MINIPIPE_TEAM_SIM_ON

#include <setjmp.h>
#include <ucontext.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace minipipe {
namespace team {
namespace sim {

// Fibers, not OS threads: only one simulated thread runs at a time anyway, and a switch costs a
// few nanoseconds instead of a futex round trip, so 256-thread teams stay cheap on a loaded
// two-core CI machine. A fiber starts on its own stack through makecontext/swapcontext; every later
// switch is _setjmp/_longjmp, which (unlike swapcontext) makes no signal-mask system call.
namespace {
struct Setting {
  bool on = false;
  Order order = Order::forward;
};

Setting from_env() {
  Setting s;
  const char* env = std::getenv("MINIPIPE_TEST_TEAM_SIM");
  if (!env || !*env) return s;
  const std::string v = env;
  if (v == "gpu") {
    s.on = true;
  } else if (v == "gpu-reverse") {
    s.on = true;
    s.order = Order::reverse;
  } else {
    throw std::invalid_argument("MINIPIPE_TEST_TEAM_SIM = '" + v + "': allowed are gpu, gpu-reverse (or unset)");
  }
  return s;
}

Setting& setting() {
  static Setting s = from_env();
  return s;
}

long& launch_count() {
  static long n = 0;
  return n;
}

constexpr std::size_t kStack = 128 * 1024;
constexpr int kMaxTeam = 1024;
constexpr std::size_t kReduceBytes = 16;  // a slot per thread, any reduced type up to 16 bytes

enum class State { runnable, at_barrier, done, failed };

struct Fiber {
  ucontext_t ctx;
  jmp_buf env;
  bool started = false;
  State state = State::runnable;
  std::size_t cursor[2] = {0, 0};
};
}  // namespace

struct Run {
  const char* label = "";
  const std::function<void(const Member&)>* body = nullptr;
  int size = 1, league = 0, current = 0;
  std::size_t request[2] = {0, 0};
  std::vector<Fiber> fibers;
  ucontext_t main;
  jmp_buf main_env;
  std::vector<unsigned char> scratch[2], reduce;
  std::string error;

  std::string where(int rank) const {
    return std::string(label) + " (simulated GPU team: league rank " + std::to_string(league) + ", thread " +
           std::to_string(rank) + " of " + std::to_string(size) + ")";
  }
};

namespace {
thread_local Run* g_run = nullptr;

// Fiber stacks, kept across launches (grown to the largest team seen).
std::vector<std::unique_ptr<char[]>>& stacks() {
  static std::vector<std::unique_ptr<char[]>> s;
  return s;
}

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void leave_fiber(Run& r);

void fiber_entry() {
  Run& r = *g_run;
  const int rank = r.current;
  Fiber& f = r.fibers[rank];
  try {
    (*r.body)(Member{&r, r.league, rank, r.size});
    f.state = State::done;
  } catch (const std::exception& e) {
    if (r.error.empty()) r.error = e.what();
    f.state = State::failed;
  } catch (...) {
    if (r.error.empty()) r.error = r.where(rank) + ": unknown exception";
    f.state = State::failed;
  }
  leave_fiber(r);  // never resumed
}

// Switches; each sits in a function of its own because _setjmp returns twice (-Wclobbered).
// Main -> fiber f: its first entry through its ucontext, later ones through its jmp_buf.
__attribute__((noinline)) void resume(Run& r, Fiber& f) {
  if (_setjmp(r.main_env) == 0) {
    if (!f.started) {
      f.started = true;
      swapcontext(&r.main, &f.ctx);
    } else {
      _longjmp(f.env, 1);
    }
  }
}

// Fiber -> main, to be resumed after its _setjmp.
__attribute__((noinline)) void yield(Run& r, Fiber& f) {
  if (_setjmp(f.env) == 0) _longjmp(r.main_env, 1);
}

void leave_fiber(Run& r) {
  _longjmp(r.main_env, 1);
}

__attribute__((noinline)) void start_fiber(Fiber& f, char* stack, ucontext_t* link) {
  f.started = false;
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = stack;
  f.ctx.uc_stack.ss_size = kStack;
  f.ctx.uc_link = link;
  makecontext(&f.ctx, fiber_entry, 0);
}

void poison(Run& r) {
  for (auto& s : r.scratch) std::memset(s.data(), 0xFF, s.size());
  std::memset(r.reduce.data(), 0xFF, r.reduce.size());
}
}  // namespace

bool active() {
  return setting().on;
}
Order order() {
  return setting().order;
}
void set(bool on, Order o) {
  setting() = Setting{on, o};
}
long launches() {
  return launch_count();
}

void fail_access(const Run* run, std::ptrdiff_t index, std::ptrdiff_t n) {
  const int rank = run ? run->current : -1;
  throw Failure((run ? run->where(rank) : std::string("team scratch")) + ": scratch access at element " +
                std::to_string(index) + " outside its carve of " + std::to_string(n) + " elements");
}

void barrier(const Member& m) {
  Run& r = *m.run;
  Fiber& f = r.fibers[m.rank];
  f.state = State::at_barrier;
  yield(r, f);
}

void* carve(const Member& m, int level, std::size_t bytes, std::size_t align) {
  Run& r = *m.run;
  if (level < 0 || level > 1) throw Failure(r.where(m.rank) + ": scratch level " + std::to_string(level));
  std::size_t& cur = r.fibers[m.rank].cursor[level];
  const std::size_t start = (cur + align - 1) / align * align;
  if (start + bytes > r.request[level])
    throw Failure(r.where(m.rank) + ": carves " + std::to_string(start + bytes) + " bytes of level-" +
                  std::to_string(level) + " scratch, the launch requested " + std::to_string(r.request[level]));
  cur = start + bytes;
  return r.scratch[level].data() + start;
}

void* reduce_slots(const Member& m) {
  return m.run->reduce.data();
}

void run_erased(const char* label, const Shape& s, const std::function<void(const Member&)>& body) {
  const std::string what = std::string(label) + " (simulated GPU launch)";
  if (s.team == kAuto)
    throw std::runtime_error(what + ": the team size is Kokkos::AUTO, which has no GPU shape to simulate");
  if (s.team < 1 || s.team > kMaxTeam)
    throw std::runtime_error(what + ": team size " + std::to_string(s.team) + " outside 1.." +
                             std::to_string(kMaxTeam));
  if (s.vector != 1)
    throw std::runtime_error(what + ": vector length " + std::to_string(s.vector) + " is not simulated");
  if (s.level < 0 || s.level > 1) throw std::runtime_error(what + ": scratch level " + std::to_string(s.level));
  if (s.level == 0 && s.scratch > kGpuScratchLevel0)
    throw std::runtime_error(what + ": " + std::to_string(s.scratch) +
                             " bytes of level-0 scratch a team, more than a GPU's " +
                             std::to_string(kGpuScratchLevel0));
  ++launch_count();
  if (s.league <= 0) return;

  Run r;
  r.label = label;
  r.body = &body;
  r.size = s.team;
  r.request[s.level] = s.scratch;
  // 64 bytes of slack past each request: a carve past the request fails before it is written
  for (int l = 0; l < 2; ++l) r.scratch[l].resize(r.request[l] + 64);
  r.reduce.resize(kReduceBytes * static_cast<std::size_t>(s.team));
  r.fibers.resize(static_cast<std::size_t>(s.team));
  auto& st = stacks();
  while (st.size() < r.fibers.size()) st.emplace_back(new char[kStack]);

  Run* const outer = g_run;
  g_run = &r;
  struct Restore {
    Run* outer;
    ~Restore() { g_run = outer; }
  } restore{outer};

  const bool reverse = order() == Order::reverse;
  for (int l = 0; l < s.league; ++l) {
    r.league = l;
    poison(r);
    for (int t = 0; t < r.size; ++t) {
      Fiber& f = r.fibers[t];
      f.state = State::runnable;
      f.cursor[0] = f.cursor[1] = 0;
      start_fiber(f, st[t].get(), &r.main);
    }
    for (int phase = 0;; ++phase) {
      int at_barrier = 0, done = 0;
      for (int i = 0; i < r.size; ++i) {
        const int t = reverse ? r.size - 1 - i : i;
        r.current = t;
        resume(r, r.fibers[t]);
        const State st_t = r.fibers[t].state;
        if (st_t == State::failed) throw std::runtime_error(r.error);
        if (st_t == State::at_barrier) ++at_barrier;
        if (st_t == State::done) ++done;
      }
      if (done == r.size) {
        // Every requested byte is carved (or none, by a thread that left before it needed scratch,
        // e.g. a row with no target): a request above the team's carves wastes a GPU's shared
        // memory (occupancy), and a carve that shrank below what its code reads through a plain
        // pointer (scratch_ptr, not checked per access) shows here.
        for (int t = 0; t < r.size; ++t)
          if (r.fibers[t].cursor[s.level] != r.request[s.level] && r.fibers[t].cursor[s.level] != 0)
            throw std::runtime_error(r.where(t) + ": carved " + std::to_string(r.fibers[t].cursor[s.level]) +
                                     " bytes of level-" + std::to_string(s.level) + " scratch, the launch requested " +
                                     std::to_string(r.request[s.level]) + " (a request must equal the team's carves)");
        break;
      }
      if (at_barrier != r.size)
        throw std::runtime_error(r.where(0) + ": after barrier phase " + std::to_string(phase) + ", " +
                                 std::to_string(at_barrier) + " threads wait at a barrier and " + std::to_string(done) +
                                 " have left the body (a barrier not reached by every thread)");
      for (Fiber& f : r.fibers) f.state = State::runnable;
    }
  }
}

}  // namespace sim
}  // namespace team
}  // namespace minipipe

#endif  // MINIPIPE_TEAM_SIM_ON
