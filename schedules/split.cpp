// Split optimizer: exact dynamic programme over (stage, blocks placed) of the slowest stage so
// far, with the sum of squared stage costs as the tie-break; O(stages * L^2), L is small.
#include "schedules/split.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "schedules/validator.hpp"

namespace minipipe::sched {

namespace {

struct Score {
  double worst = std::numeric_limits<double>::infinity(), squares = std::numeric_limits<double>::infinity();
};

// Costs equal within a relative 1e-12 tie (sums of the same terms in another order).
bool better(const Score& a, const Score& b) {
  if (!std::isfinite(b.worst)) return std::isfinite(a.worst);
  const double tol = 1e-12 * std::max(1.0, std::max(std::abs(a.worst), std::abs(b.worst)));
  if (a.worst < b.worst - tol) return true;
  if (a.worst > b.worst + tol) return false;
  return a.squares < b.squares - 1e-12 * std::max(1.0, b.squares);
}

}  // namespace

std::vector<int> balanced_split(const std::vector<double>& block, double first, double last, int stages) {
  if (stages < 1) throw ScheduleError("split: " + std::to_string(stages) + " stages; allowed: >= 1");
  for (double x : {first, last})
    if (!std::isfinite(x) || x < 0) throw ScheduleError("split: embedding/head cost " + std::to_string(x) + " < 0");
  for (double x : block)
    if (!std::isfinite(x) || x < 0) throw ScheduleError("split: block cost " + std::to_string(x) + " < 0");
  const int L = static_cast<int>(block.size());
  std::vector<double> prefix(L + 1, 0.0);
  for (int l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + block[l];
  auto stage_cost = [&](int s, int a, int b) {  // stage s holds blocks [a, b)
    return prefix[b] - prefix[a] + (s == 0 ? first : 0.0) + (s == stages - 1 ? last : 0.0);
  };
  // best[s][l]: stages 0..s-1 hold blocks [0, l); from[s][l]: where stage s-1 starts.
  std::vector<std::vector<Score>> best(stages + 1, std::vector<Score>(L + 1));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(L + 1, 0));
  best[0][0] = {0.0, 0.0};
  for (int s = 1; s <= stages; ++s)
    for (int l = 0; l <= L; ++l)
      for (int a = l; a >= 0; --a) {  // larger a first: ties keep the later stage's start late
        if (!std::isfinite(best[s - 1][a].worst)) continue;
        const double c = stage_cost(s - 1, a, l);
        const Score cand{std::max(best[s - 1][a].worst, c), best[s - 1][a].squares + c * c};
        if (better(cand, best[s][l])) best[s][l] = cand, from[s][l] = a;
      }
  std::vector<int> counts(stages);
  for (int s = stages, l = L; s >= 1; --s) {
    counts[s - 1] = l - from[s][l];
    l = from[s][l];
  }
  return counts;
}

double slowest_stage(const std::vector<double>& block, double first, double last, const std::vector<int>& counts) {
  double worst = 0;
  std::size_t l = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    double c = (s == 0 ? first : 0.0) + (s + 1 == counts.size() ? last : 0.0);
    for (int k = 0; k < counts[s]; ++k) c += block.at(l++);
    worst = std::max(worst, c);
  }
  return worst;
}

}  // namespace minipipe::sched
