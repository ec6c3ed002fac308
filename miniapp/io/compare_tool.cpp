// `minipipe compare`: CLI11 wiring of compare_files. Missing files are not rejected by the
// parser but by compare_files, so they get h5diff's exit code 2 and a message naming the file.
#include "miniapp/io/compare_tool.hpp"

namespace minipipe::io {

void CompareTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("compare",
                              "Compare two HDF5 dumps dataset by dataset: bitwise equality, max abs/rel "
                              "error, max ULP distance. Exit 0 same, 1 differ, 2 error (like h5diff).");
  sub->add_option("A", file_a, "first dump (reference)")->required();
  sub->add_option("B", file_b, "second dump")->required();
  sub->add_flag("--include-meta", options.include_meta,
                "also compare /meta and every attribute (run metadata differs between runs by design)");
  rtol_opt_ = sub->add_option("--rtol", rtol_,
                              "relative tolerance: elements with |a-b|/max(|a|,|b|) <= X count as same "
                              "(default: off, bitwise)")
                  ->check(CLI::NonNegativeNumber);
  atol_opt_ =
      sub->add_option("--atol", atol_, "absolute tolerance: elements with |a-b| <= X count as same (default: off)")
          ->check(CLI::NonNegativeNumber);
  norm_opt_ = sub->add_option("--norm-rtol", norm_rtol_,
                              "normwise tolerance: a dataset with max|a-b| <= X * max(|a|,|b|) counts as same "
                              "(default: off)")
                  ->check(CLI::NonNegativeNumber);
  sub->add_flag("-v,--verbose", options.verbose, "a line for every dataset, not only the differing ones");
}

int CompareTool::run(std::ostream& out) {
  if (rtol_opt_ != nullptr && rtol_opt_->count() > 0) options.rtol = rtol_;
  if (atol_opt_ != nullptr && atol_opt_->count() > 0) options.atol = atol_;
  if (norm_opt_ != nullptr && norm_opt_->count() > 0) options.norm_rtol = norm_rtol_;
  return compare_files(file_a, file_b, options, out);
}

}  // namespace minipipe::io
