// The kernel counters' Kokkos Tools callbacks, work registry and same-run peak probes. The
// callbacks use Kokkos::Tools::Experimental::set_*_callback, which Kokkos 3.4 and 4.x both offer
// with the same C signatures; Kokkos before 3.5 fires no fence events (the shims count instead).
#include "kernels/kernel_counters.hpp"

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/gemm.hpp"
#include "kernels/types.hpp"
#include "kernels/workspace.hpp"

namespace minipipe::counters {

namespace detail {
bool g_counting = false;
int g_sync_depth = 0;
bool g_sync_seen = false;
std::int64_t g_host_syncs = 0;
}  // namespace detail

namespace {

using SpaceHandle = Kokkos::Tools::SpaceHandle;

struct InFlight {
  std::string label;
  double t0 = 0.0;
  bool reduce = false;
};

struct State {
  bool timed = false;
  int own_fences = 0;  // > 0 while the counters fence for their own timing
  std::map<std::string, WorkStats> work;
  std::map<std::string, KokkosKernelStats> kokkos;
  SyncCounts sync;
  std::map<std::string, std::uint64_t> fence_labels;
  std::vector<InFlight> inflight;  // kernels begun and not ended (a stack: kernels do not overlap on the host)
  int scope_depth = 0;
  std::string scope_label;  // the outermost open WorkScope
};

State& state() {
  static State s;
  return s;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The counters' own fence, for timing only; neither shim nor callback counts it.
void own_fence() {
  State& s = state();
  ++s.own_fences;
  Kokkos::fence();
  --s.own_fences;
}

// A Kokkos event inside a HostSync: the first one is the synchronization Kokkos Tools sees (a
// blocking copy may fence inside, a reduction into a host scalar fences after the kernel).
void note_sync_event() {
  if (detail::g_sync_depth > 0 && !detail::g_sync_seen) {
    detail::g_sync_seen = true;
    ++state().sync.host_syncs;
  }
}

// Kokkos' names of host-accessible spaces (Kokkos_*Space.hpp: HostSpace is "Host", the pinned
// host spaces "CudaHostPinned", "HIPHostPinned", SYCL's host USM "SYCLHostUSM"); every other
// space (Cuda, CudaUVM, HIP, HIPManaged, SYCLDeviceUSM, ...) counts as device memory.
bool host_space(const SpaceHandle& h) {
  const std::string n(h.name);
  return n == "Host" || n == "HostSpace" || n == "CudaHostPinned" || n == "HIPHostPinned" || n == "SYCLHostUSM";
}

void begin_kernel(const char* name, std::uint32_t, std::uint64_t* id, bool reduce) {
  note_sync_event();
  State& s = state();
  if (s.timed) own_fence();
  *id = s.inflight.size();
  s.inflight.push_back({name ? name : "?", now(), reduce});
}

void begin_for(const char* name, const std::uint32_t dev, std::uint64_t* id) {
  begin_kernel(name, dev, id, false);
}
void begin_reduce(const char* name, const std::uint32_t dev, std::uint64_t* id) {
  begin_kernel(name, dev, id, true);
}

void end_kernel(const std::uint64_t id) {
  State& s = state();
  if (id >= s.inflight.size()) return;
  if (s.timed) own_fence();
  const InFlight k = s.inflight[id];
  s.inflight.resize(id);
  KokkosKernelStats& st = s.kokkos[k.label];
  ++st.calls;
  if (s.timed) st.seconds += now() - k.t0;
  ++s.sync.kernels;
  if (k.reduce) {
    ++st.reduces;
    ++s.sync.reduces;
  }
}

void begin_fence(const char* name, const std::uint32_t, std::uint64_t* handle) {
  *handle = 0;
  State& s = state();
  if (s.own_fences > 0) return;
  note_sync_event();
  if (name && std::strncmp(name, "Kokkos::", 8) == 0) {
    ++s.sync.kokkos_fences;
  } else {
    ++s.sync.fences;
    ++s.fence_labels[name ? name : "?"];
  }
}
void end_fence(const std::uint64_t) {}

void begin_deep_copy(SpaceHandle dst, const char*, const void*, SpaceHandle src, const char* src_label, const void*,
                     std::uint64_t bytes) {
  note_sync_event();
  SyncCounts& c = state().sync;
  // deep_copy(view, value) is a fill: Kokkos labels its source "Scalar", and Kokkos 3.4 labels it
  // "(none)" in the overload that takes an execution space (fills ordered with the step's kernels).
  if (src_label && (std::strcmp(src_label, "Scalar") == 0 || std::strcmp(src_label, "(none)") == 0)) {
    ++c.fills;
    c.fill_bytes += bytes;
    return;
  }
  const bool dh = host_space(dst), sh = host_space(src);
  if (sh && dh) {
    ++c.h2h;
    c.h2h_bytes += bytes;
  } else if (sh) {
    ++c.h2d;
    c.h2d_bytes += bytes;
  } else if (dh) {
    ++c.d2h;
    c.d2h_bytes += bytes;
  } else {
    ++c.d2d;
    c.d2d_bytes += bytes;
  }
}
void end_deep_copy() {}

// Kokkos 3.4 delivers events only while a tool's init callback is set.
void tool_init(const int, const std::uint64_t, const std::uint32_t, Kokkos::Profiling::KokkosPDeviceInfo*) {}
void tool_finalize() {}

}  // namespace

SyncCounts SyncCounts::operator-(const SyncCounts& o) const {
  SyncCounts d;
  d.fences = fences - o.fences, d.kokkos_fences = kokkos_fences - o.kokkos_fences;
  d.d2h = d2h - o.d2h, d.h2d = h2d - o.h2d, d.d2d = d2d - o.d2d, d.h2h = h2h - o.h2h, d.fills = fills - o.fills;
  d.d2h_bytes = d2h_bytes - o.d2h_bytes, d.h2d_bytes = h2d_bytes - o.h2d_bytes;
  d.d2d_bytes = d2d_bytes - o.d2d_bytes, d.h2h_bytes = h2h_bytes - o.h2h_bytes;
  d.fill_bytes = fill_bytes - o.fill_bytes;
  d.kernels = kernels - o.kernels, d.reduces = reduces - o.reduces;
  d.host_syncs = host_syncs - o.host_syncs;
  return d;
}

void enable(bool timed) {
  namespace E = Kokkos::Tools::Experimental;
  state().timed = timed;
  E::set_init_callback(tool_init);
  E::set_finalize_callback(tool_finalize);
  E::set_begin_parallel_for_callback(begin_for);
  E::set_end_parallel_for_callback(end_kernel);
  E::set_begin_parallel_scan_callback(begin_for);
  E::set_end_parallel_scan_callback(end_kernel);
  E::set_begin_parallel_reduce_callback(begin_reduce);
  E::set_end_parallel_reduce_callback(end_kernel);
  E::set_begin_fence_callback(begin_fence);
  E::set_end_fence_callback(end_fence);
  E::set_begin_deep_copy_callback(begin_deep_copy);
  E::set_end_deep_copy_callback(end_deep_copy);
  detail::g_counting = true;
}

void disable() {
  namespace E = Kokkos::Tools::Experimental;
  detail::g_counting = false;
  E::set_begin_parallel_for_callback(nullptr);
  E::set_end_parallel_for_callback(nullptr);
  E::set_begin_parallel_scan_callback(nullptr);
  E::set_end_parallel_scan_callback(nullptr);
  E::set_begin_parallel_reduce_callback(nullptr);
  E::set_end_parallel_reduce_callback(nullptr);
  E::set_begin_fence_callback(nullptr);
  E::set_end_fence_callback(nullptr);
  E::set_begin_deep_copy_callback(nullptr);
  E::set_end_deep_copy_callback(nullptr);
  E::set_finalize_callback(nullptr);
  E::set_init_callback(nullptr);
}

void reset_work() {
  State& s = state();
  s.work.clear();
  s.kokkos.clear();
  s.fence_labels.clear();
}

void note_program_fence(const char* label) {
  State& s = state();
  if (!detail::g_counting || s.own_fences > 0) return;
  note_sync_event();
  ++s.sync.fences;
  ++s.fence_labels[label ? label : "?"];
}

Snapshot snapshot() {
  const State& s = state();
  return Snapshot{s.work, s.kokkos, s.sync, s.fence_labels};
}

SyncCounts sync_now() {
  return state().sync;
}

void WorkScope::open(const char* label, double flops, double bytes, double model_flops) {
  State& s = state();
  open_ = true;
  outer_ = s.scope_depth++ == 0;
  if (outer_) s.scope_label = label;
  WorkStats& w = s.work[s.scope_label];
  if (outer_) ++w.calls;
  w.flops += flops;
  w.bytes += bytes;
  w.model_flops += model_flops;
  if (outer_ && s.timed) {
    own_fence();
    t0_ = now();
  }
}

void WorkScope::close() {
  State& s = state();
  --s.scope_depth;
  if (!outer_ || !s.timed) return;
  own_fence();
  s.work[s.scope_label].seconds += now() - t0_;
}

Peaks measure_peaks(int n, std::uint64_t elements, int repeat, const std::string& blas_label) {
  Peaks p;
  p.backend = ExecSpace::name();
  p.sgemm_n = n;
  p.triad_elements = elements;
  repeat = std::max(repeat, 1);
  auto best_of = [&](auto&& run) {
    run();  // warm-up (first touch, library start-up)
    double best = 1e300;
    for (int r = 0; r < repeat; ++r) {
      own_fence();
      const double t0 = now();
      run();
      own_fence();
      best = std::min(best, now() - t0);
    }
    return best;
  };
  {
    Kokkos::View<float**, Kokkos::LayoutRight, MemSpace> a("Counters::sgemm_a", n, n), b("Counters::sgemm_b", n, n),
        c("Counters::sgemm_c", n, n);
    Kokkos::parallel_for(
        "Counters::sgemm_fill", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const int i) {
          for (int j = 0; j < n; ++j) {
            a(i, j) = 1.0f / static_cast<float>(1 + ((i + 3 * j) % 17));
            b(i, j) = 1.0f / static_cast<float>(1 + ((2 * i + j) % 13));
          }
        });
    const double flop = 2.0 * n * static_cast<double>(n) * n;
    const double t_blas = best_of([&] { KokkosBlas::gemm("N", "N", 1.0f, a, b, 0.0f, c); });
    p.sgemm_probes.push_back({blas_label, flop / t_blas / 1e9});
    KernelWorkspace ws;
    const double t_det =
        best_of([&] { gemm_det<float>(ws, n, n, n, row_major(a.data(), n), row_major(b.data(), n), c.data(), n); });
    p.sgemm_probes.push_back({gemm_det_label(), flop / t_det / 1e9});
    for (const GemmProbe& g : p.sgemm_probes)
      if (g.gflops > p.sgemm_gflops) p.sgemm_gflops = g.gflops, p.sgemm_library = g.library;
  }
  {
    Kokkos::View<float*, MemSpace> a("Counters::triad_a", elements), b("Counters::triad_b", elements),
        c("Counters::triad_c", elements);
    Kokkos::parallel_for(
        "Counters::triad_fill", Kokkos::RangePolicy<ExecSpace>(0, elements), KOKKOS_LAMBDA(const std::uint64_t i) {
          b(i) = 1.0f + static_cast<float>(i % 7);
          c(i) = 2.0f - static_cast<float>(i % 5);
        });
    const float s = 3.0f;
    const double t = best_of([&] {
      Kokkos::parallel_for(
          "Counters::triad", Kokkos::RangePolicy<ExecSpace>(0, elements),
          KOKKOS_LAMBDA(const std::uint64_t i) { a(i) = b(i) + s * c(i); });
    });
    p.triad_gbs = 3.0 * sizeof(float) * static_cast<double>(elements) / t / 1e9;
  }
  return p;
}

}  // namespace minipipe::counters
