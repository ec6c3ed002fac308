// The kernel counters' report (`profile.kernels`): the per-kernel table with achieved GFLOP/s and
// GB/s beside the same-run sgemm and triad, the per-step host synchronizations, the JSON section
// and the SVG roofline. Pure functions of the counted numbers (no Kokkos).
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/kernel_counters.hpp"

namespace minipipe {

struct KernelCounterReport {
  bool timed = true;
  int steps = 0;  // steps the work and time are summed over (the first is left out when there are several)
  std::map<std::string, counters::WorkStats> work;            // rank 0's kernel entries
  std::map<std::string, counters::KokkosKernelStats> kokkos;  // rank 0's Kokkos kernels
  // Per rank (index = rank of the pipeline), per step: synchronizations and copies.
  std::vector<std::vector<counters::SyncCounts>> sync;
  std::map<std::string, std::uint64_t> fence_labels;  // rank 0's fences by label over the counted steps
  int run_steps = 0;                                  // = steps
  int dw_exact_group = 0;  // samples per exact fold of held dW samples (host path; the sync formula needs it)
  counters::Peaks peaks;
};

// Achieved rates of one kernel entry (0 when it has no time).
double gflops(const counters::WorkStats& w);
double gbytes_per_second(const counters::WorkStats& w);

// The kernel entries at the roofline of the same-run peaks: each entry's time bound is
// max(FLOPs / sgemm, bytes / triad), the time it would take at its roof. Entries above the ridge
// (FLOP/B >= sgemm / triad) are bound by the sgemm, the others by the triad. With the model FLOPs,
// the rate over the same-run sgemm that the step's kernels would reach at the roof, against the one
// they reached (both over the kernels' summed time). Zero everywhere without both peaks.
struct RoofSummary {
  double ridge = 0;                                // FLOP per byte where the two roofs meet
  double compute_bound = 0, compute_measured = 0;  // seconds, entries at or above the ridge
  double memory_bound = 0, memory_measured = 0;    // seconds, entries below it
  double model_over_sgemm_bound = 0, model_over_sgemm_measured = 0;
  double bound() const { return compute_bound + memory_bound; }
  double measured() const { return compute_measured + memory_measured; }
};
RoofSummary roof_summary(const KernelCounterReport& r);

// The per-kernel table (sorted by time), the roofline summary, the peaks and each rank's
// synchronizations of the last step.
void print_kernel_report(const KernelCounterReport& r, std::ostream& out);
// The JSON object of the report's "kernel_counters" section.
std::string kernel_counters_json(const KernelCounterReport& r);
// Log-log roofline: GFLOP/s against FLOPs per byte, the roofs min(sgemm, triad x intensity) and
// one point per kernel entry with work.
void write_roofline_svg(const KernelCounterReport& r, std::ostream& out);

}  // namespace minipipe
