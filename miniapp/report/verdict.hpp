// What a benchmark suite reads off every run: the figure of merit (trained tokens per second of
// the whole job, with the model FLOP rate beside it) and the verification verdict.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "kernels/mode.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/report/report.hpp"

namespace minipipe {

// Training FLOPs of one token, forward and backward (docs/benchmarking.md derives it):
// 6 (12 L C^2 + V C) for the weight GEMMs and 6 L C (T + 1) for causal attention.
double flops_per_token(const ModelShape& shape);

struct FigureOfMerit {
  double tokens_per_second = 0;  // sum of B*T over the timed steps / their summed step time
  double model_tflops = 0;       // tokens_per_second * flops_per_token / 1e12
};
// Timed steps: every step of a run after its first (a one-step run: that step), every run of
// the launch.
FigureOfMerit figure_of_merit(const std::vector<RunReport>& runs, const ModelShape& shape);

struct Verdict {
  bool pass = true;
  std::string why;  // empty when pass
};
// Fast mode's verification tolerance: max|run - ref| <= 1e-4 max(|run|, |ref|) per dataset.
constexpr double kFastNormRtol = 1e-4;

// In deterministic mode every run's dump must equal the launch's first (RunReport's
// dump_vs_reference). With `reference` (--verify): every run's dump against it, bitwise in
// deterministic mode. In fast mode each dataset within kFastNormRtol normwise; with AdamW
// (`adamw`) only what precedes its first update (/init and step 0 up to its gradients), since
// AdamW turns a gradient that is zero up to rounding into a +-lr step (docs/determinism.md,
// "Verifying fast mode"). Without a reference: the built-in checks (the trainer stops a run at the
// first non-finite loss, gradient or parameter, so what is left is that the loss fell): the last
// loss below the first, or below `first_loss` (the training's step-0 loss, NaN when unknown) for a
// run restarted from a checkpoint. `first_step` > 0 (a restart from a checkpoint of that many
// completed steps): the reference's /init and steps before first_step are not compared, the run's
// own /init (the parameters it started from) neither; its continued steps are.
Verdict verify_runs(const std::vector<RunReport>& runs, const std::string& reference, Mode mode,
                    double first_loss = std::numeric_limits<double>::quiet_NaN(), bool adamw = true,
                    long long first_step = 0);

// "FOM: 21662 tokens/s (model 0.0272 TFLOP/s)" and "verification: PASS" / "verification: FAIL (why)".
// With test hooks set (`hooks`: active_test_hooks_text) the FOM says it is not a measurement and
// the verdict reads "PASS (test hooks active: ...)" or "FAIL (why; test hooks active: ...)": a run
// a hook changed never reads as a clean PASS.
std::string fom_line(const FigureOfMerit& fom, const std::string& hooks = "");
// "PASS", "PASS (test hooks active: ...)" or "FAIL (...)": the JSON's verification.
std::string verdict_text(const Verdict& v, const std::string& hooks = "");
std::string verdict_line(const Verdict& v, const std::string& hooks = "");

}  // namespace minipipe
