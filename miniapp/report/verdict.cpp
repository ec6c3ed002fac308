// Figure of merit and verification of a launch, from the run reports (and, with --verify, the
// dumps): pure except for reading the HDF5 files being compared.
#include "miniapp/report/verdict.hpp"

#include <cstdio>
#include <sstream>

#include "miniapp/io/compare.hpp"

namespace minipipe {

double flops_per_token(const ModelShape& s) {
  const double L = s.n_layer, C = s.channels, V = s.vocab, T = s.seq_len;
  return 6.0 * (12.0 * L * C * C + V * C) + 6.0 * L * C * (T + 1.0);
}

FigureOfMerit figure_of_merit(const std::vector<RunReport>& runs, const ModelShape& shape) {
  double tokens = 0, seconds = 0;
  for (const auto& r : runs) {
    const std::size_t first = r.step_seconds.size() > 1 ? 1 : 0;
    for (std::size_t i = first; i < r.step_seconds.size(); ++i) {
      tokens += static_cast<double>(r.batch) * r.seq_len;
      seconds += r.step_seconds[i];
    }
  }
  FigureOfMerit f;
  if (seconds > 0) f.tokens_per_second = tokens / seconds;
  f.model_tflops = f.tokens_per_second * flops_per_token(shape) / 1e12;
  return f;
}

Verdict verify_runs(const std::vector<RunReport>& runs, const std::string& reference, Mode mode) {
  for (const auto& r : runs) {
    const std::string run = "run " + r.schedule + " m=" + std::to_string(r.m);
    // Deterministic runs of one launch must dump the same bits as its first (the reference run).
    if (mode == Mode::deterministic && (r.dump_vs_reference == "DIFFERS" || r.dump_vs_reference == "error"))
      return {false, run + ": its dump " +
                         (r.dump_vs_reference == "error" ? std::string("could not be compared with")
                                                         : std::string("differs from")) +
                         " the dump of the launch's first run"};
    if (!reference.empty()) {
      if (r.dump_path.empty()) return {false, run + " has no dump to compare with " + reference + " (set output.dump)"};
      io::CompareOptions opt;
      if (mode == Mode::fast) opt.norm_rtol = 1e-4;
      io::CompareReport rep;
      try {
        rep = io::compare_dumps(reference, r.dump_path, opt);
      } catch (const std::exception& e) {
        return {false, run + ": " + e.what()};
      }
      if (rep.exit_code != 0) {
        std::ostringstream os;
        os << run << ": " << rep.differing << " dataset(s) differ from " << reference << " and " << rep.missing
           << " are in one file only";
        for (const auto& d : rep.datasets)
          if (d.status != io::DiffStatus::identical && d.status != io::DiffStatus::within_tolerance) {
            os << " (first: " << d.path << ", " << io::to_string(d.status) << ")";
            break;
          }
        return {false, os.str()};
      }
    } else if (r.losses.size() > 1 && !(r.losses.back() < r.losses.front())) {
      char text[160];
      std::snprintf(text, sizeof(text), "%s: the loss did not fall (first %.6g, last %.6g)", run.c_str(),
                    r.losses.front(), r.losses.back());
      return {false, text};
    }
  }
  return {};
}

std::string fom_line(const FigureOfMerit& fom) {
  char text[128];
  std::snprintf(text, sizeof(text), "FOM: %.6g tokens/s (model %.4g TFLOP/s)", fom.tokens_per_second, fom.model_tflops);
  return text;
}

std::string verdict_line(const Verdict& v) {
  return v.pass ? "verification: PASS" : "verification: FAIL (" + v.why + ")";
}

}  // namespace minipipe
