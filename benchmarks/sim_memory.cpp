// Heap bytes and CPU time of one totals-only simulation at sweep sizes (p = 128, m = 1024): the
// whole Schedule against rank programs. Counts every operator new, so the peak is exact.
//   minipipe_sim_memory NAME P M schedule|programs
// Builds also against a tree without schedules/program.hpp (then only `schedule`), so the same
// file measures the simulator before and after rank programs.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "schedules/schedules.hpp"
#if __has_include("schedules/program.hpp")
#include "schedules/program.hpp"
#define MINIPIPE_HAVE_PROGRAMS 1
#endif

namespace {

std::size_t g_now = 0, g_peak = 0;

void* counted(std::size_t n) {
  // The size sits in front of the block, so delete knows what it frees.
  void* p = std::malloc(n + alignof(std::max_align_t));
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  g_now += n;
  if (g_now > g_peak) g_peak = g_now;
  return static_cast<char*>(p) + alignof(std::max_align_t);
}

void uncounted(void* q) noexcept {
  if (!q) return;
  char* p = static_cast<char*>(q) - alignof(std::max_align_t);
  g_now -= *reinterpret_cast<std::size_t*>(p);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) {
  return counted(n);
}
void* operator new[](std::size_t n) {
  return counted(n);
}
void operator delete(void* p) noexcept {
  uncounted(p);
}
void operator delete[](void* p) noexcept {
  uncounted(p);
}
void operator delete(void* p, std::size_t) noexcept {
  uncounted(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  uncounted(p);
}

int main(int argc, char** argv) {
  namespace ms = minipipe::sched;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s NAME P M schedule|programs\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1], how = argv[4];
  const int p = std::atoi(argv[2]), m = std::atoi(argv[3]);
  const std::size_t base = g_now;
  g_peak = g_now;
  const auto t0 = std::chrono::steady_clock::now();
  double makespan = 0;
  std::size_t built = 0;
  if (how == "schedule") {
    const ms::Schedule s = ms::make_schedule(name, p, m);
    built = g_now - base;
    makespan = ms::simulate_totals(s, ms::CostModel::uniform(s.num_stages(), 1, 2, 0, 0, 0.1)).makespan;
#ifdef MINIPIPE_HAVE_PROGRAMS
  } else if (how == "programs") {
    const ms::RankPrograms s = ms::make_rank_programs(name, p, m);
    built = g_now - base;
    const ms::StepTotals t = ms::simulate_totals(s, ms::CostModel::uniform(s.num_stages(), 1, 2, 0, 0, 0.1));
    makespan = t.makespan;
    std::printf("programs %zu B, completion table at its peak %zu B\n", s.bytes(), t.state_bytes);
#endif
  } else {
    std::fprintf(stderr, "unknown mode '%s'\n", how.c_str());
    return 2;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s p=%d m=%d %s: makespan %.17g, held after building %zu B, peak %zu B, %.3f s\n", name.c_str(), p, m,
              how.c_str(), makespan, built, g_peak - base, secs);
  return 0;
}
