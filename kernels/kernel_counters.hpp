// Built-in kernel counters (`profile.kernels`): Kokkos Tools callbacks that miniPipe registers
// itself (no external tool) count every Kokkos kernel, fence and deep copy; kernel entries feed
// a light registry of FLOPs and bytes from their shapes. Off (the default) nothing is registered
// and each kernel entry pays one test of a global flag. This header has no Kokkos in it, so host
// code (reports) reads the results.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace minipipe::counters {

namespace detail {
extern bool g_counting;            // set by enable(); read inline by every kernel entry
extern int g_sync_depth;           // > 0 inside a HostSync
extern bool g_sync_seen;           // the open HostSync's first Kokkos event was counted
extern std::int64_t g_host_syncs;  // HostSyncs opened (outermost ones), counting or not
}  // namespace detail

// One host synchronization (the host waits for the device: a fence, a blocking copy between host
// and device memory, a reduction into a host scalar), opened around the Kokkos call that waits;
// kernels/types.hpp's shims are the only users. It is counted twice, from one place: here, always
// (host_sync_count(), the run report's "host syncs N/step"), and, while counting, by the Kokkos
// Tools callbacks as the first fence, copy or kernel event Kokkos reports inside it
// (SyncCounts::host_syncs). The two agree by construction unless a HostSync wraps a call that is
// no Kokkos event (check_kernel_counters.py asserts they are equal in every step).
class HostSync {
 public:
  HostSync() {
    if (detail::g_sync_depth++ == 0) {
      ++detail::g_host_syncs;
      detail::g_sync_seen = false;
    }
  }
  ~HostSync() { --detail::g_sync_depth; }
  HostSync(const HostSync&) = delete;
  HostSync& operator=(const HostSync&) = delete;
};
inline std::int64_t host_sync_count() {
  return detail::g_host_syncs;
}

// True while counting: a kernel entry computes its FLOPs and bytes only then.
inline bool counting() {
  return detail::g_counting;
}

// Registers the Kokkos Tools callbacks (replacing any loaded tool's for the rest of the run) and
// starts counting. `timed`: fence before and after each kernel and each work scope so its time is
// its own (the only fences counting adds; they are not counted). After Kokkos::initialize.
void enable(bool timed);
// Stops counting and unregisters the callbacks (before Kokkos::finalize).
void disable();
// Forgets the kernel entries' and Kokkos kernels' counts (after a warm-up step, or for a new
// run of a sweep); the synchronization counts run on (callers take differences of sync_now()).
void reset_work();

// One kernel entry's work: opened in the entry with its FLOPs and bytes moved (compulsory
// traffic: every operand read once, every result written once). `model_flops` is the part of
// `flops` that the FOM's model counts (the matrix products; docs/benchmarking.md). Scopes do not
// nest: a scope opened inside another adds its work to the outer one.
class WorkScope {
 public:
  WorkScope(const char* label, double flops, double bytes, double model_flops = 0.0) {
    if (detail::g_counting) open(label, flops, bytes, model_flops);
  }
  ~WorkScope() {
    if (open_) close();
  }
  WorkScope(const WorkScope&) = delete;
  WorkScope& operator=(const WorkScope&) = delete;

 private:
  void open(const char* label, double flops, double bytes, double model_flops);
  void close();
  bool open_ = false;
  bool outer_ = false;
  double t0_ = 0.0;
};

// Kernel-entry work, per label.
struct WorkStats {
  std::uint64_t calls = 0;
  double seconds = 0.0;  // fenced wall time of the scopes (0 when not timed)
  double flops = 0.0, bytes = 0.0, model_flops = 0.0;
};

// One Kokkos kernel label (parallel_for / reduce / scan), as Kokkos Tools reports it.
struct KokkosKernelStats {
  std::uint64_t calls = 0;
  double seconds = 0.0;  // fenced when timed
  std::uint64_t reduces = 0;
};

// Host synchronizations and copies. Copies are classified by the memory spaces Kokkos names:
// host spaces (HostSpace, pinned host memory) and device spaces; a fill (deep_copy of a scalar)
// is not a transfer and counts apart. Fences: those miniPipe's code asks for (its fence shims)
// and those Kokkos issues itself (named "Kokkos::...", reported by Kokkos 3.5 and later only).
struct SyncCounts {
  std::uint64_t fences = 0, kokkos_fences = 0;
  std::uint64_t d2h = 0, h2d = 0, d2d = 0, h2h = 0, fills = 0;
  std::uint64_t d2h_bytes = 0, h2d_bytes = 0, d2d_bytes = 0, h2h_bytes = 0, fill_bytes = 0;
  std::uint64_t kernels = 0, reduces = 0;  // Kokkos kernels launched; of them parallel_reduce
  std::uint64_t host_syncs = 0;            // HostSyncs that Kokkos reported an event in (= host_sync_count()'s)
  SyncCounts operator-(const SyncCounts& o) const;
};

// Everything counted so far on this process.
struct Snapshot {
  std::map<std::string, WorkStats> work;
  std::map<std::string, KokkosKernelStats> kokkos;
  SyncCounts sync;
  std::map<std::string, std::uint64_t> fence_labels;  // miniPipe's fences by label, since reset_work()
};
Snapshot snapshot();
SyncCounts sync_now();

// Called by the fence shims of kernels/types.hpp: Kokkos before 3.5 reports no fence event.
void note_program_fence(const char* label);

// Same-run peaks the kernels are set against: the fastest square sgemm this build runs on
// ExecSpace's memory and a STREAM triad a(i) = b(i) + s c(i) on ExecSpace, each the best of
// `repeat` timed runs after a warm-up. n: the GEMM size; elements: the triad's length. The GEMMs
// timed are KokkosBlas::gemm (the vendor BLAS where Kokkos Kernels has its TPL, else Kokkos
// Kernels' own GEMM, a few percent of a tuned one on a CPU) and gemm_det's plain GEMM (what fast
// mode runs where it takes gemm_det); sgemm_gflops is the faster, sgemm_probes has both.
// A slow reference would put kernels above their roof and inflate every ratio to the sgemm.
struct GemmProbe {
  std::string library;
  double gflops = 0.0;
};
struct Peaks {
  double sgemm_gflops = 0.0;
  std::string sgemm_library;
  std::vector<GemmProbe> sgemm_probes;
  int sgemm_n = 0;
  double triad_gbs = 0.0;
  std::uint64_t triad_elements = 0;
  std::string backend;
};
// blas_label names what KokkosBlas::gemm calls (the caller knows the library and its core).
Peaks measure_peaks(int sgemm_n, std::uint64_t triad_elements, int repeat, const std::string& blas_label);

}  // namespace minipipe::counters
