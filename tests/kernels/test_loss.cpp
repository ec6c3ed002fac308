// Loss normalisation (docs/design.md §2): the global loss is the sum of per-token losses over the
// whole global batch divided by its valid-token count, never the mean of micro-batch means.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cross_entropy.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using test::Tensor;

TEST(Loss, GlobalLossIsTokenWeightedNotMeanOfMeans) {
  // Four micro-batches with valid token counts [8,4,8,2] and loss sums [16,12,8,6].
  const std::vector<double> sums = {16, 12, 8, 6};
  const std::vector<int> counts = {8, 4, 8, 2};
  const double loss = global_loss(sums, counts);
  EXPECT_EQ(loss, 42.0 / 22.0);
  const double mean_of_means = (16.0 / 8 + 12.0 / 4 + 8.0 / 8 + 6.0 / 2) / 4;  // 2.25: the wrong answer
  EXPECT_GT(std::fabs(loss - mean_of_means), 0.3);
  std::printf("  [measure] global loss %.17g (42/22), mean of means would be %.17g\n", loss, mean_of_means);
}

TEST(Loss, GlobalLossIsExactAndOrderIndependent) {
  // A naive double sum loses the small terms next to 1e13 and depends on the order; the exact
  // fixed-point sum gives 2e-4 in every order.
  const std::vector<double> sums = {1e13, 1e-4, -1e13, 1e-4};
  const std::vector<int> counts = {1, 1, 1, 1};
  std::vector<int> perm = {0, 1, 2, 3};
  const double expect = 2e-4 / 4;
  const double first = global_loss(sums, counts);
  EXPECT_NEAR(first, expect, 1e-15 * expect);
  do {
    std::vector<double> s;
    std::vector<int> c;
    for (int i : perm) {
      s.push_back(sums[i]);
      c.push_back(counts[i]);
    }
    const double l = global_loss(s, c);
    EXPECT_EQ(0, std::memcmp(&l, &first, sizeof(double))) << "order changed the bits";
  } while (std::next_permutation(perm.begin(), perm.end()));
  double naive = 0;
  for (double v : sums) naive += v;
  EXPECT_NE(naive / 4, expect) << "control: the naive sum should have lost the small terms";
}

TEST(Loss, GlobalLossRejectsBadInput) {
  EXPECT_THROW(global_loss({1.0, 2.0}, {1}), std::invalid_argument);
  EXPECT_THROW(global_loss({0.0, 0.0}, {0, 0}), std::invalid_argument);
  EXPECT_THROW(global_loss({1e300}, {1}), std::runtime_error);
  EXPECT_THROW(global_loss({std::nan("")}, {1}), std::runtime_error);
}

// End to end through the kernels: four micro-batches of one padded sequence each with [8,4,8,2]
// valid tokens; per-sample sums and counts from sample_sums, combined with global_loss.
TEST(Loss, MicroBatchesThroughKernels) {
  const int T = 8, V = 11;
  const std::vector<int> valid_counts = {8, 4, 8, 2};
  std::vector<double> sums, all_losses;
  std::vector<int> counts;
  double mean_of_means = 0;
  for (int mb = 0; mb < 4; ++mb) {
    std::vector<int> tg(T);
    for (int t = 0; t < T; ++t) tg[t] = t < valid_counts[mb] ? (t * 3 + mb) % V : -1;  // right padding
    test::IntTensor targets(tg);
    Tensor<double> logits("logits", T, V), losses("losses", T);
    test::fill_uniform(logits, 50 + mb, -3.0, 3.0);
    CrossEntropy<double>::forward(Mode::deterministic, logits.cmat(), targets.all(), losses.vec());
    Kokkos::View<double*, MemSpace> loss_sum("loss_sum", 1);
    Kokkos::View<int*, MemSpace> valid("valid", 1);
    CrossEntropy<double>::sample_sums(1, T, losses.cvec(), targets.all(), loss_sum, valid);
    auto ls = Kokkos::create_mirror_view(loss_sum);
    auto vc = Kokkos::create_mirror_view(valid);
    Kokkos::deep_copy(ls, loss_sum);
    Kokkos::deep_copy(vc, valid);
    EXPECT_EQ(vc(0), valid_counts[mb]);
    double s = 0;  // same order t = 0..T-1 as the kernel
    const std::vector<double> l = losses.host_values();
    for (int t = 0; t < T; ++t)
      if (tg[t] >= 0) {
        s += l[t];
        all_losses.push_back(l[t]);
      } else {
        EXPECT_EQ(l[t], 0.0);
      }
    EXPECT_EQ(ls(0), s);
    sums.push_back(ls(0));
    counts.push_back(vc(0));
    mean_of_means += s / valid_counts[mb] / 4;
  }
  double total = 0;
  for (double l : all_losses) total += l;
  const double loss = global_loss(sums, counts);
  EXPECT_EQ(all_losses.size(), 22u);
  EXPECT_NEAR(loss, total / 22.0, 1e-14 * loss);
  EXPECT_GT(std::fabs(loss - mean_of_means), 1e-3) << "data chosen so the two definitions differ";
  std::printf("  [measure] kernel global loss %.15f, mean of micro-batch means %.15f\n", loss, mean_of_means);
}

}  // namespace
}  // namespace minipipe
