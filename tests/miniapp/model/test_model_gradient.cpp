// The whole tiny model's gradient in double precision against central finite differences of
// the global loss (every parameter tensor, a few elements each; fourth-order differences).
#include <gtest/gtest.h>

#include <cmath>

#include "single_stage.hpp"

using namespace minipipe;
using namespace minipipe::testing;

TEST(ModelGradient, MatchesCentralFiniteDifferences) {
  const auto shape = tiny_shape();
  const Batch b = test_batch(shape, 3);
  SingleStage<double> model(shape, Mode::deterministic);
  model.step(b, 2, false);
  const auto grads = model.gather(true);
  std::size_t off = 0, checked = 0;
  double worst = 0;
  for (auto& p : model.stage.params()) {
    const std::size_t n = p.spec.numel();
    auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), p.value);
    // Three elements spread over the tensor, the largest-gradient one among them.
    std::size_t best = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (std::abs(grads[off + i]) > std::abs(grads[off + best])) best = i;
    for (std::size_t i : {std::size_t(0), n / 2, best}) {
      // Fourth-order central difference: truncation O(h^4) (LayerNorm over small activations
      // makes high derivatives large, so h stays small) and round-off
      // ~ eps * loss / h ~ 4e-12, so gradients of 1e-5 are resolved to ~1e-6 relative.
      const double h = 1e-4, x0 = host(i);
      auto loss_at = [&](double x) {
        host(i) = x;
        Kokkos::deep_copy(p.value, host);
        return model.loss(b);
      };
      const double fd =
          (-loss_at(x0 + 2 * h) + 8 * loss_at(x0 + h) - 8 * loss_at(x0 - h) + loss_at(x0 - 2 * h)) / (12 * h);
      loss_at(x0);
      const double g = grads[off + i];
      // Relative error below 1e-6 where the finite difference can resolve it; below |g| = 1e-5
      // the difference's own round-off (~5e-12 here) dominates, so those are held to 1e-11 absolute.
      const double scale = std::max(std::abs(fd), std::abs(g));
      if (scale < 1e-5) {
        EXPECT_LT(std::abs(fd - g), 1e-11) << p.spec.name << "[" << i << "]: analytic " << g << ", fd " << fd;
        continue;
      }
      const double rel = std::abs(fd - g) / scale;
      worst = std::max(worst, rel);
      EXPECT_LT(rel, 1e-6) << p.spec.name << "[" << i << "]: analytic " << g << ", finite difference " << fd;
      ++checked;
    }
    off += n;
  }
  EXPECT_GT(checked, 40u);  // relative checks actually made
  std::printf("model gradient: %zu elements checked, worst relative error %.3g\n", checked, worst);
}
