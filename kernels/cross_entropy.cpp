// Cross-entropy kernels (rowred's canonical row order in deterministic mode, host loop or device
// team kernel; team reductions and libm in fast mode on the device path) and the exact global loss
// normalisation. On the host fast mode runs the deterministic row loop, which is 3-4x faster than a
// Serial team per row with scalar libm exp; fast mode's tolerance contract allows its bits.
#include "cross_entropy.hpp"

#include <stdexcept>
#include <string>

#include "detmath.hpp"
#include "exact_sum.hpp"
#include "kernel_path.hpp"
#include "row_reduce.hpp"
#include "team.hpp"

namespace minipipe {

namespace {
// Where MemSpace is not host-accessible (a GPU) use_device_path() is always true (kernel_path.cpp).
constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

// Row n's max and sum of exp(logit - max) in rowred's canonical order (deterministic mode), as a
// host loop and as a team kernel: the same partials and tree, so the same bits. Forward and
// backward share them. The host loop forms the exps a chunk of kChunk logits at a time with
// det::exp_array (det::exp's bits, through det::exp_normal where the chunk is in its range), then
// adds them to the lanes: chunks start at multiples of rowred::kLanes, so lane l still takes the
// indices l, l + kLanes, ... in ascending order. det::exp per element inside the lane loop took the
// full range-selecting exp for every logit.
constexpr int kChunk = 512;

template <class Real>
KOKKOS_INLINE_FUNCTION void row_max_sumexp(const CMat<Real>& logits, int n, int V, Real& mx, Real& sum) {
  mx = rowred::reduce<rowred::Max, Real>(V, [&](int v, Real m) { return logits(n, v) > m ? logits(n, v) : m; });
  constexpr int L = rowred::kLanes;
  Real p[L];
  for (int l = 0; l < L; ++l) p[l] = rowred::Sum::identity<Real>();
  Real e[kChunk];
  for (int c0 = 0; c0 < V; c0 += kChunk) {
    const int k = V - c0 < kChunk ? V - c0 : kChunk;
    det::exp_array(&logits(n, c0), mx, e, k, 0);
    int j = 0;
    for (; j + L <= k; j += L)
      for (int l = 0; l < L; ++l) p[l] = p[l] + e[j + l];
    for (int l = 0; j + l < k; ++l) p[l] = p[l] + e[j + l];
  }
  sum = rowred::tree<rowred::Sum, Real>(p);
}

template <class Real, class M, class P>
KOKKOS_INLINE_FUNCTION void team_row_max_sumexp_det(const M& tm, P red, const CMat<Real>& logits, int n, int V,
                                                    Real& mx, Real& sum) {
  mx = rowred::team_reduce<rowred::Max, Real>(tm, red, V,
                                              [&](int v, Real m) { return logits(n, v) > m ? logits(n, v) : m; });
  const Real m = mx;
  sum =
      rowred::team_reduce<rowred::Sum, Real>(tm, red, V, [&](int v, Real a) { return a + det::exp(logits(n, v) - m); });
}

// The same with team reductions and libm (fast mode).
template <class Real, class M>
KOKKOS_INLINE_FUNCTION void team_row_max_sumexp(const M& tm, const CMat<Real>& logits, int n, int V, Real& mx,
                                                Real& sum) {
  mx = team::max<Real>(tm, V, [&](const int v, Real& m) { m = logits(n, v) > m ? logits(n, v) : m; });
  const Real m = mx;
  sum = team::sum<Real>(tm, V, [&](const int v, Real& t) { t += kmath::exp(logits(n, v) - m); });
}

// Forward, a team per row n of (N,V).
template <class Real, bool kDet>
struct Forward {
  CMat<Real> logits;
  CIdx targets;
  Vec<Real> losses;
  int V;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    const int n = team::league(tm);
    const int tgt = targets(n);
    if (tgt < 0) {
      team::single(tm, [&]() { losses(n) = 0; });
      return;
    }
    Real mx, sum;
    if constexpr (kDet) {
      const auto red = team::scratch<Real>(tm, 0, rowred::kLanes);
      team_row_max_sumexp_det(tm, red, logits, n, V, mx, sum);
      team::single(tm, [&]() { losses(n) = det::log(sum) - (logits(n, tgt) - mx); });
    } else {
      team_row_max_sumexp(tm, logits, n, V, mx, sum);
      team::single(tm, [&]() { losses(n) = kmath::log(sum) - (logits(n, tgt) - mx); });
    }
  }
};

// Backward-input, a team per row n of (N,V).
template <class Real, bool kDet>
struct BackwardInput {
  CMat<Real> logits;
  CIdx targets;
  Mat<Real> dlogits;
  Real scale;
  int V;
  template <class M>
  KOKKOS_INLINE_FUNCTION void operator()(const M& tm) const {
    const int n = team::league(tm);
    const int tgt = targets(n);
    if (tgt < 0) {
      team::threads(tm, V, [&](const int v) { dlogits(n, v) = 0; });
      return;
    }
    Real mx, sum;
    if constexpr (kDet) {
      const auto red = team::scratch<Real>(tm, 0, rowred::kLanes);
      team_row_max_sumexp_det(tm, red, logits, n, V, mx, sum);  // the same bits as forward's
      team::threads(tm, V, [&](const int v) {
        const Real p = det::exp(logits(n, v) - mx) / sum;
        dlogits(n, v) = (v == tgt ? p - Real(1) : p) * scale;
      });
    } else {
      team_row_max_sumexp(tm, logits, n, V, mx, sum);
      team::threads(tm, V, [&](const int v) {
        const Real p = kmath::exp(logits(n, v) - mx) / sum;
        dlogits(n, v) = (v == tgt ? p - Real(1) : p) * scale;
      });
    }
  }
};
}  // namespace

template <class Real>
void CrossEntropy<Real>::forward(Mode mode, CMat<Real> logits, CIdx targets, Vec<Real> losses) {
  const int N = static_cast<int>(logits.extent(0));
  const int V = static_cast<int>(logits.extent(1));
  require(targets.extent(0) == logits.extent(0) && losses.extent(0) == logits.extent(0), "CrossEntropy::forward",
          "targets and losses must have one entry per logits row");
  // Per logit: max 1, exp of the difference 2, sum 1 FLOPs; logits read, targets and losses.
  const double nv = double(N) * V, sz = sizeof(Real);
  counters::WorkScope work("CrossEntropy::forward", 4 * nv, sz * (nv + N) + 4.0 * N);
  if (mode == Mode::deterministic && use_device_path()) {
    team::launch<rowred::kLanes, rowred::kRowMinTeams>(
        "CrossEntropy::forward_device",
        rowred::row_shape(team::launch_target(), N, team::scratch_bytes<Real>(rowred::kLanes)),
        Forward<Real, true>{logits, targets, losses, V});
    return;
  }
  if constexpr (kHostAccessible) {  // a GPU never takes the host path: not compiled for it
    if (!use_device_path()) {       // host, both modes
      Kokkos::parallel_for(
          "CrossEntropy::forward", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const int n) {  // row n of (N,V)
            const int tgt = targets(n);
            if (tgt < 0) {
              losses(n) = 0;
              return;
            }
            Real mx, sum;
            row_max_sumexp(logits, n, V, mx, sum);
            losses(n) = det::log(sum) - (logits(n, tgt) - mx);
          });
      return;
    }
  }
  team::launch<rowred::kLanes, rowred::kRowMinTeams>("CrossEntropy::forward",
                                                     rowred::row_shape(team::launch_target(), N, 0),
                                                     Forward<Real, false>{logits, targets, losses, V});
}

template <class Real>
void CrossEntropy<Real>::sample_sums(int B, int T, CVec<Real> losses, CIdx targets,
                                     Kokkos::View<double*, MemSpace> loss_sum, Kokkos::View<int*, MemSpace> valid) {
  const std::size_t N = std::size_t(B) * std::size_t(T);
  require(losses.extent(0) == N && targets.extent(0) == N, "CrossEntropy::sample_sums",
          "losses and targets must have B*T = " + std::to_string(N) + " entries");
  require(loss_sum.extent(0) == std::size_t(B) && valid.extent(0) == std::size_t(B), "CrossEntropy::sample_sums",
          "loss_sum and valid must have B entries");
  counters::WorkScope work("CrossEntropy::sample_sums", double(N), sizeof(Real) * double(N) + 4.0 * N + 12.0 * B);
  Kokkos::parallel_for(
      "CrossEntropy::sample_sums", Kokkos::RangePolicy<ExecSpace>(0, B), KOKKOS_LAMBDA(const int b) {
        double s = 0.0;
        int count = 0;
        for (int t = 0; t < T; ++t) {
          const int n = b * T + t;
          if (targets(n) < 0) continue;
          s += static_cast<double>(losses(n));
          ++count;
        }
        loss_sum(b) = s;
        valid(b) = count;
      });
}

template <class Real>
void CrossEntropy<Real>::backward_input(Mode mode, CMat<Real> logits, CIdx targets, Real scale, Mat<Real> dlogits) {
  const int N = static_cast<int>(logits.extent(0));
  const int V = static_cast<int>(logits.extent(1));
  require(targets.extent(0) == logits.extent(0), "CrossEntropy::backward_input", "targets must have N entries");
  require(dlogits.extent(0) == logits.extent(0) && dlogits.extent(1) == logits.extent(1),
          "CrossEntropy::backward_input", "dlogits must have the shape of logits");
  // Per logit: max 1, exp of the difference 2, sum 1, softmax minus one-hot times scale 3 FLOPs.
  const double nv = double(N) * V, sz = sizeof(Real);
  counters::WorkScope work("CrossEntropy::backward_input", 7 * nv, sz * 2 * nv + 4.0 * N);
  if (mode == Mode::deterministic && use_device_path()) {
    team::launch<rowred::kLanes, rowred::kRowMinTeams>(
        "CrossEntropy::backward_input_device",
        rowred::row_shape(team::launch_target(), N, team::scratch_bytes<Real>(rowred::kLanes)),
        BackwardInput<Real, true>{logits, targets, dlogits, scale, V});
    return;
  }
  if constexpr (kHostAccessible) {  // a GPU never takes the host path: not compiled for it
    if (!use_device_path()) {       // host, both modes
      Kokkos::parallel_for(
          "CrossEntropy::backward_input", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const int n) {
            const int tgt = targets(n);
            if (tgt < 0) {
              for (int v = 0; v < V; ++v) dlogits(n, v) = 0;
              return;
            }
            Real mx, sum;
            row_max_sumexp(logits, n, V, mx, sum);  // the same bits as forward's
            Real e[kChunk];
            for (int c0 = 0; c0 < V; c0 += kChunk) {
              const int k = V - c0 < kChunk ? V - c0 : kChunk;
              det::exp_array(&logits(n, c0), mx, e, k, 0);
              Real* d = &dlogits(n, c0);
              for (int j = 0; j < k; ++j) d[j] = e[j] / sum * scale;
              if (tgt >= c0 && tgt < c0 + k) d[tgt - c0] = (e[tgt - c0] / sum - Real(1)) * scale;
            }
          });
      return;
    }
  }
  team::launch<rowred::kLanes, rowred::kRowMinTeams>("CrossEntropy::backward_input",
                                                     rowred::row_shape(team::launch_target(), N, 0),
                                                     BackwardInput<Real, false>{logits, targets, dlogits, scale, V});
}

template struct CrossEntropy<float>;
template struct CrossEntropy<double>;

double global_loss(const std::vector<double>& loss_sums, const std::vector<int>& counts) {
  if (loss_sums.size() != counts.size())
    throw std::invalid_argument("global_loss: " + std::to_string(loss_sums.size()) + " loss sums but " +
                                std::to_string(counts.size()) + " token counts");
  Fixed128 total_loss;
  int overflow = 0;
  long long total_tokens = 0;
  for (std::size_t i = 0; i < loss_sums.size(); ++i) {
    ExactSum::add(total_loss, loss_sums[i], overflow);
    if (counts[i] < 0) throw std::invalid_argument("global_loss: negative token count at sample " + std::to_string(i));
    total_tokens += counts[i];
  }
  if (overflow) throw std::runtime_error("global_loss: a loss sum is not finite or exceeds the exact range");
  if (total_tokens == 0) throw std::invalid_argument("global_loss: the global batch has no valid target token");
  return ExactSum::to_double(total_loss) / static_cast<double>(total_tokens);
}

}  // namespace minipipe
