// Dataset-by-dataset comparison of two HDF5 dumps (`minipipe compare`): bitwise equality plus
// max abs / rel error and ULP distance, with h5diff's exit codes (0 same, 1 differ, 2 error).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "miniapp/io/dataflow_order.hpp"

namespace minipipe::io {

struct CompareOptions {
  bool include_meta = false;  // also compare /meta (datasets and every object's attributes)
  bool verbose = false;       // a line for every dataset, not only the ones that differ
  // Tolerance mode (either set): a differing element is "within tolerance" when
  // |a-b| <= atol or |a-b| / max(|a|,|b|) <= rtol; NaN against anything else never is.
  // A dataset whose differing elements are all within tolerance counts as same for the exit code.
  std::optional<double> rtol;
  std::optional<double> atol;
  // Normwise tolerance: a dataset is within tolerance when max|a-b| <= norm_rtol * max(|a|,|b|)
  // over the whole dataset (the relative error of the tensor in the max norm). Element-wise
  // relative error is meaningless for entries that are zero up to rounding (a key bias's
  // gradient, for one), so this is how fast mode is compared with deterministic mode.
  std::optional<double> norm_rtol;
};

enum class DiffStatus {
  identical,         // same shape, type and bytes
  within_tolerance,  // differs, but every element within rtol/atol (tolerance mode only)
  differ,            // values differ beyond tolerance (or at all, without tolerance)
  only_in_a,
  only_in_b,
  shape_mismatch,
  type_mismatch,
  not_comparable,  // variable-length data: no fixed bytes to compare
};
const char* to_string(DiffStatus s);

struct DatasetDiff {
  std::string path;
  DiffStatus status = DiffStatus::identical;
  std::string type_a, type_b;
  std::vector<std::uint64_t> dims_a, dims_b;
  std::uint64_t elements = 0;
  std::uint64_t differing = 0;         // elements whose bits differ
  std::uint64_t out_of_tolerance = 0;  // of those, beyond rtol/atol (all of them without tolerance)
  std::uint64_t nan_mismatches = 0;    // NaN in one file or both (payloads differ): differ, no ULP distance
  double max_abs = 0.0;                // +inf when a NaN or inf is involved
  double max_rel = 0.0;                // |a-b| / max(|a|,|b|)
  double max_magnitude = 0.0;          // max(|a|,|b|) over every finite element (floats)
  double norm_rel = 0.0;               // max_abs / max_magnitude
  std::uint64_t max_ulp = 0;           // integers: |a-b|; floats: distance in the ordered bit space,
                                       // NaN elements left out (+0 vs -0: 0)
  std::uint64_t first_index = 0;       // flat index of the first differing element
  std::string first_a, first_b;        // its values, printed to round-trip precision
  std::uint64_t first_ulp = 0;         // its ULP distance (integers: |a-b|); 0 when first_nan
  bool first_nan = false;              // a NaN on either side: no ULP distance
  DatasetOrigin origin;                // dataflow position and producing kernel
};

struct AttributeDiff {
  std::string object, name;
  bool in_a = true, in_b = true;
  std::string value_a, value_b;
  bool same = true;
};

// The first dataset, in dataflow order, whose values differ beyond tolerance (or whose shape or
// type differs); datasets present in one file only are skipped, as the dataflow order says.
struct FirstDivergence {
  bool found = false;
  std::size_t dataset = 0;        // index into CompareReport::datasets
  std::size_t later = 0;          // differing datasets after it (one-file-only ones excluded)
  std::size_t one_file_only = 0;  // datasets present in one file only
};

struct CompareReport {
  std::vector<DatasetDiff> datasets;  // union of both files' datasets, in dataflow order (dataflow_order.hpp)
  FirstDivergence first;
  std::vector<AttributeDiff> attributes;                           // only with include_meta
  std::size_t identical = 0, within_tolerance = 0, differing = 0;  // differing includes below
  std::size_t missing = 0, mismatched = 0;                         // only in one file; shape/type/not comparable
  std::size_t attributes_differing = 0;
  double max_abs = 0.0, max_rel = 0.0, max_norm_rel = 0.0;
  std::uint64_t max_ulp = 0;
  int exit_code = 0;  // 0 same (within tolerance in tolerance mode), 1 differ
};

// Compares and returns the structured result; throws ReadError when a file cannot be read.
CompareReport compare_dumps(const std::string& a, const std::string& b, const CompareOptions& opt);

// Writes the per-dataset lines, the one-line summary and, last, the first-divergence line:
// "first divergence: <path> (kernel <label>, step <N>, layer <layer>) element <flat> [<i,j,..>]:
// <a> vs <b>, <ulp> ULP; <K> later datasets differ", or "first divergence: none".
// The first-divergence line alone (no newline).
std::string first_divergence_line(const CompareReport& report);

void print_report(const CompareReport& report, const CompareOptions& opt, std::ostream& out);

// compare_dumps + print_report; returns 0 / 1, or 2 after printing "error: ..." when a file
// is missing, unreadable or not HDF5 (like h5diff).
int compare_files(const std::string& a, const std::string& b, const CompareOptions& opt, std::ostream& out);
// The same, but an error (exit 2) is handed back in `*error` instead of printed to `out`, so that
// the `compare` tool prints it through the tools' error path (stderr, with the prefix).
int compare_files(const std::string& a, const std::string& b, const CompareOptions& opt, std::ostream& out,
                  std::string* error);

}  // namespace minipipe::io
