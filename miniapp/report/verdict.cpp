// Figure of merit and verification of a launch, from the run reports (and, with --verify, the
// dumps): pure except for reading the HDF5 files being compared.
#include "miniapp/report/verdict.hpp"

#include <algorithm>
#include <cmath>
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

namespace {

// Fast mode with AdamW: whether a dataset is downstream of the first optimizer update (a step's
// updated parameters, or anything of a later step). AdamW divides by sqrt(v): its first step is
// lr * sign(g), so a gradient element that is zero up to rounding (the key bias's: the softmax
// cancels it; any element whose samples cancel) steps +-lr in whichever direction fast mode's
// rounding went. No tolerance on what follows holds by construction; everything before it is
// computed from the same parameters and tokens and differs by rounding alone.
bool after_first_adamw_update(const std::string& path) {
  if (path.rfind("/step_", 0) != 0) return false;  // /init
  const bool later = path.compare(0, 10, "/step_0000") != 0;
  return later || path.find("/params/") != std::string::npos;
}

// A restarted run (from a checkpoint of `first_step` completed steps) is verified on the steps it
// ran. What it did not compute is not compared: the reference's /init and its steps before the
// restart. The run's own /init holds the parameters it started from (the checkpoint's, which are
// the reference's /step_<first_step - 1>/params): every continued step is computed from them, so
// a wrong start cannot pass through the continued steps' bits.
bool before_restart(const std::string& path, long long first_step) {
  if (first_step <= 0) return false;
  if (path.rfind("/init/", 0) == 0 || path == "/init") return true;
  if (path.rfind("/step_", 0) != 0) return false;
  const std::size_t end = path.find('/', 6);
  try {
    return std::stoll(path.substr(6, end == std::string::npos ? std::string::npos : end - 6)) < first_step;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

Verdict verify_runs(const std::vector<RunReport>& runs, const std::string& reference, Mode mode, double first_loss,
                    bool adamw, long long first_step) {
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
      if (mode == Mode::fast) opt.norm_rtol = kFastNormRtol;
      io::CompareReport rep;
      std::vector<const io::DatasetDiff*> failed;
      try {
        rep = io::compare_dumps(reference, r.dump_path, opt);
        for (const auto& d : rep.datasets) {
          if (d.status == io::DiffStatus::identical || d.status == io::DiffStatus::within_tolerance) continue;
          if (mode == Mode::fast && adamw && after_first_adamw_update(d.path)) continue;
          // Only the run's part: a dataset the run has and the reference lacks still fails.
          if (before_restart(d.path, first_step) && d.status != io::DiffStatus::only_in_b) continue;
          failed.push_back(&d);
        }
      } catch (const std::exception& e) {
        return {false, run + ": " + e.what()};
      }
      if (!failed.empty()) {
        std::ostringstream os;
        os << run << ": " << failed.size() << " dataset(s) differ from " << reference;
        std::size_t missing = 0;
        for (const auto* d : failed)
          missing += d->status == io::DiffStatus::only_in_a || d->status == io::DiffStatus::only_in_b;
        if (missing > 0) os << " (" << missing << " in one file only)";
        os << " (first: " << failed.front()->path << ", " << io::to_string(failed.front()->status);
        if (mode == Mode::fast && failed.front()->status == io::DiffStatus::differ)
          os << ", normwise " << failed.front()->norm_rel << " > " << kFastNormRtol;
        os << ")";
        return {false, os.str()};
      }
    } else {
      // A restarted run is judged from the training's first loss (which its checkpoint carries),
      // so that a restarted chain gets the uninterrupted run's verdict.
      const bool restarted = std::isfinite(first_loss);
      if (!r.losses.empty() && (restarted || r.losses.size() > 1) &&
          !(r.losses.back() < (restarted ? first_loss : r.losses.front()))) {
        char text[200];
        std::snprintf(text, sizeof(text), "%s: the loss did not fall (first %.6g%s, last %.6g)", run.c_str(),
                      restarted ? first_loss : r.losses.front(), restarted ? " at step 0, before the restart" : "",
                      r.losses.back());
        return {false, text};
      }
    }
  }
  return {};
}

std::string fom_line(const FigureOfMerit& fom, const std::string& hooks) {
  char text[128];
  std::snprintf(text, sizeof(text), "FOM: %.6g tokens/s (model %.4g TFLOP/s)", fom.tokens_per_second, fom.model_tflops);
  return hooks.empty() ? std::string(text)
                       : std::string(text) + " (not a measurement: test hooks active: " + hooks + ")";
}

std::string verdict_text(const Verdict& v, const std::string& test_hooks) {
  // A hook delays actions or moves bits on purpose: the checks may hold, but the run is not the
  // program's own, so its PASS always carries the hooks (and a FAIL names them too).
  const std::string hooks = test_hooks.empty() ? "" : "test hooks active: " + test_hooks;
  if (v.pass) return hooks.empty() ? "PASS" : "PASS (" + hooks + ")";
  return "FAIL (" + v.why + (hooks.empty() ? "" : "; " + hooks) + ")";
}

std::string verdict_line(const Verdict& v, const std::string& hooks) {
  return "verification: " + verdict_text(v, hooks);
}

}  // namespace minipipe
