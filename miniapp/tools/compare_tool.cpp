// `minipipe compare`: CLI11 wiring of compare_files. Missing files are not rejected by the
// parser but by compare_files, so they get h5diff's exit code 2 and a message naming the file.
#include "miniapp/tools/compare_tool.hpp"

#include <cmath>
#include <cstdlib>

#include "miniapp/io/message_text.hpp"
#include "miniapp/tools/command.hpp"

namespace minipipe {

namespace {

// CLI11's NonNegativeNumber lets "nan" through (nan < 0 is false), and a NaN tolerance would
// silently mean "no tolerance at all"; refuse it, and infinities, naming the value.
const CLI::Validator& finite_non_negative() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(x) || x < 0)
          return "value " + quoted_text(text) + " is not allowed; allowed: a finite number >= 0";
        return {};
      },
      "FINITE>=0");
  return v;
}

}  // namespace

void CompareTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("compare",
                              "Compare two HDF5 dumps dataset by dataset: bitwise equality, max abs/rel "
                              "error, max ULP distance. Exit 0 same, 1 differ, 2 bad input or usage: unreadable "
                              "file, bad option (like h5diff).");
  sub->add_option("A", file_a, "first dump (reference)")->required();
  sub->add_option("B", file_b, "second dump")->required();
  sub->add_flag("--include-meta", options.include_meta,
                "also compare /meta and every attribute (run metadata differs between runs by design)");
  rtol_opt_ = sub->add_option("--rtol", rtol_,
                              "relative tolerance: elements with |a-b|/max(|a|,|b|) <= X count as same "
                              "(default: off, bitwise)")
                  ->check(finite_non_negative());
  atol_opt_ =
      sub->add_option("--atol", atol_, "absolute tolerance: elements with |a-b| <= X count as same (default: off)")
          ->check(finite_non_negative());
  norm_opt_ = sub->add_option("--norm-rtol", norm_rtol_,
                              "normwise tolerance: a dataset with max|a-b| <= X * max(|a|,|b|) counts as same "
                              "(default: off)")
                  ->check(finite_non_negative());
  sub->add_flag("-v,--verbose", options.verbose, "a line for every dataset, not only the differing ones");
}

int CompareTool::run(std::ostream& out) {
  if (rtol_opt_ != nullptr && rtol_opt_->count() > 0) options.rtol = rtol_;
  if (atol_opt_ != nullptr && atol_opt_->count() > 0) options.atol = atol_;
  if (norm_opt_ != nullptr && norm_opt_->count() > 0) options.norm_rtol = norm_rtol_;
  std::string error;
  const int rc = io::compare_files(file_a, file_b, options, out, &error);
  return error.empty() ? rc : print_error(*err, error, kExitUsage);
}

}  // namespace minipipe
