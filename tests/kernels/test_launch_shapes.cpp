// The simulated GPU team executor (kernels/team_sim.hpp) that runs device kernels at a GPU build's
// launch shape in CI, and fast mode's device team kernels at that shape against the host path.
// The deterministic kernels at GPU shapes: test_kernel_paths under MINIPIPE_TEST_TEAM_SIM (ctest
// launch_shapes_kernel_paths_*).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cross_entropy.hpp"
#include "kernels/grad_accum.hpp"
#include "kernels/kernel_path.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/team.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using team::sim::Order;
using test::PathScope;
using test::Tensor;

// Turns the executor on for one scope and restores the previous setting.
class SimScope {
 public:
  explicit SimScope(Order o) : on_(team::sim::active()), order_(team::sim::order()) { team::sim::set(true, o); }
  ~SimScope() { team::sim::set(on_, order_); }
  SimScope(const SimScope&) = delete;
  SimScope& operator=(const SimScope&) = delete;

 private:
  bool on_;
  Order order_;
};

// Each thread writes its scratch slot, (kBarrier) waits for the team, reads its neighbour's slot.
template <bool kBarrier>
struct Neighbour {
  View1<float> out;
  template <class M>
  void operator()(const M& tm) const {
    const int r = team::rank(tm), n = team::size(tm);
    const auto s = team::scratch<float>(tm, 0, n);
    s[r] = static_cast<float>(r + 1);
    if (kBarrier) team::barrier(tm);
    out(team::league(tm) * n + r) = s[(r + 1) % n];
  }
};

team::Shape shape(int league, int threads, std::size_t scratch) {
  team::Shape s;
  s.league = league;
  s.team = threads;
  s.scratch = scratch;
  return s;
}

template <bool kBarrier>
std::vector<float> neighbours(Order o, int league, int threads) {
  SimScope sim(o);
  View1<float> out("out", std::size_t(league) * threads);
  team::launch("test::neighbour", shape(league, threads, team::scratch_bytes<float>(threads)),
               Neighbour<kBarrier>{out});
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  return std::vector<float>(h.data(), h.data() + h.extent(0));
}

// With the barrier every thread reads its neighbour's value; without it, the thread that runs first
// (thread 0 in order, T-1 in reverse order) reads a slot not yet written: the poison, a NaN.
TEST(LaunchShapes, MissingBarrierReadsPoison) {
  for (Order o : {Order::forward, Order::reverse}) {
    const std::vector<float> good = neighbours<true>(o, 3, 256);
    for (int l = 0; l < 3; ++l) {
      for (int r = 0; r < 256; ++r) {
        ASSERT_EQ(good[l * 256 + r], float((r + 1) % 256 + 1)) << l << " " << r;
      }
    }
    const std::vector<float> bad = neighbours<false>(o, 3, 256);
    const int first = o == Order::forward ? 0 : 255;
    for (int l = 0; l < 3; ++l) {
      EXPECT_TRUE(std::isnan(bad[l * 256 + first])) << "team " << l;
    }
  }
}

// Reads one element past its carve.
struct PastTheCarve {
  View1<float> out;
  template <class M>
  void operator()(const M& tm) const {
    const auto s = team::scratch<float>(tm, 0, 8);
    team::threads(tm, 9, [&](const int e) { out(e) = s[e]; });
  }
};

// Carves 8 elements from a request two elements short (Kokkos rounds a carve's span up to 8 bytes).
struct CarveBeyondRequest {
  template <class M>
  void operator()(const M& tm) const {
    const auto s = team::scratch<float>(tm, 0, 8);
    team::single(tm, [&]() { s[0] = 1; });
  }
};

// Thread 0 leaves before the barrier the others wait at.
struct EarlyExit {
  template <class M>
  void operator()(const M& tm) const {
    if (team::rank(tm) == 0) return;
    team::barrier(tm);
  }
};

std::string failure(const team::Shape& s, const std::function<void()>& launch) {
  (void)s;
  try {
    launch();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchShapes, ExecutorChecksScratchAndBarriers) {
  SimScope sim(Order::forward);
  View1<float> out("out", 16);
  const team::Shape ok = shape(2, 32, team::scratch_bytes<float>(8));
  EXPECT_NE(failure(ok, [&] { team::launch("test::past", ok, PastTheCarve{out}); }).find("outside its carve of 8"),
            std::string::npos);
  const team::Shape short_request = shape(1, 4, team::scratch_bytes<float>(8) - 8);
  EXPECT_NE(failure(short_request, [&] { team::launch("test::carve", short_request, CarveBeyondRequest{}); })
                .find("the launch requested"),
            std::string::npos);
  const team::Shape big = shape(1, 4, team::kGpuScratchLevel0 + 1);
  EXPECT_NE(failure(big, [&] { team::launch("test::big", big, CarveBeyondRequest{}); }).find("more than a GPU's"),
            std::string::npos);
  const team::Shape four = shape(1, 4, 0);
  EXPECT_NE(failure(four, [&] { team::launch("test::early", four, EarlyExit{}); }).find("barrier not reached"),
            std::string::npos);
  const team::Shape autos = shape(1, team::kAuto, 0);
  EXPECT_NE(failure(autos, [&] { team::launch("test::auto", autos, EarlyExit{}); }).find("AUTO"), std::string::npos);
}

// ---- fast mode's device row kernels at their GPU shape (a 32-thread team a row) -------------------

template <class T>
double max_rel(Tensor<T>& a, Tensor<T>& ref) {
  a.pull();
  ref.pull();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a.h(i)) - double(ref.h(i))));
    den = std::max(den, std::fabs(double(ref.h(i))));
  }
  return den > 0 ? num / den : num;
}

// Fast mode's device kernels (team reductions, libm) against the host path (fast mode runs the
// deterministic row loops there): the tolerance of fast mode, and one bit pattern for both thread
// orders (the executor combines team reductions in rank order).
template <class T>
void fast_rows_case(int N, int C) {
  const std::string what =
      std::string(sizeof(T) == 4 ? "float" : "double") + " N" + std::to_string(N) + " C" + std::to_string(C);
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
  Tensor<T> x("x", N, C), w("w", C), b("b", C), dout("dout", N, C);
  test::fill_uniform(x, 91, -3.0, 5.0);
  test::fill_uniform(w, 92);
  test::fill_uniform(b, 93);
  test::fill_uniform(dout, 94);
  std::vector<int> tg(N);
  for (int n = 0; n < N; ++n) tg[n] = n % 4 == 3 ? -1 : (n * 5) % C;
  test::IntTensor targets(tg);
  // k = 0: host path; 1, 2: device path at the GPU shape, threads in order and reversed
  std::vector<Tensor<T>> out, mean, rstd, dx, loss, dl, dw, db;
  for (int k = 0; k < 3; ++k) {
    out.emplace_back("o", N, C);
    mean.emplace_back("m", N);
    rstd.emplace_back("r", N);
    dx.emplace_back("dx", N, C);
    loss.emplace_back("l", N);
    dl.emplace_back("dl", N, C);
    dw.emplace_back("dw", C);
    db.emplace_back("db", C);
  }
  for (int k = 0; k < 3; ++k) {
    PathScope path(k == 0 ? KernelPath::host : KernelPath::device);
    std::unique_ptr<SimScope> sim;
    if (k > 0) sim = std::make_unique<SimScope>(k == 1 ? Order::forward : Order::reverse);
    const long before = team::sim::launches();
    LayerNorm<T>::forward(Mode::fast, x.cmat(), w.cvec(), b.cvec(), out[k].mat(), mean[k].vec(), rstd[k].vec());
    LayerNorm<T>::backward_input(Mode::fast, x.cmat(), w.cvec(), mean[k].cvec(), rstd[k].cvec(), dout.cmat(),
                                 dx[k].mat());
    GradAccum<T> gw("dw", C, Mode::fast), gb("db", C, Mode::fast);
    gw.zero();
    gb.zero();
    LayerNorm<T>::backward_weight(Mode::fast, x.cmat(), mean[k].cvec(), rstd[k].cvec(), dout.cmat(), 1, gw, gb);
    gw.finalize(dw[k].d);
    gb.finalize(db[k].d);
    CrossEntropy<T>::forward(Mode::fast, x.cmat(), targets.all(), loss[k].vec());
    CrossEntropy<T>::backward_input(Mode::fast, x.cmat(), targets.all(), T(0.5), dl[k].mat());
    if (k > 0) {
      EXPECT_EQ(team::sim::launches() - before, 5) << what << ": every kernel ran on the executor";
    }
  }
  for (int k = 1; k < 3; ++k) {
    EXPECT_LT(max_rel(out[k], out[0]), tol) << what << " LayerNorm out";
    EXPECT_LT(max_rel(rstd[k], rstd[0]), tol) << what << " LayerNorm rstd";
    EXPECT_LT(max_rel(dx[k], dx[0]), 50 * tol) << what << " LayerNorm dx";
    EXPECT_LT(max_rel(dw[k], dw[0]), 50 * tol) << what << " LayerNorm dw";
    EXPECT_LT(max_rel(db[k], db[0]), 50 * tol) << what << " LayerNorm db";
    EXPECT_LT(max_rel(loss[k], loss[0]), tol) << what << " CrossEntropy loss";
    EXPECT_LT(max_rel(dl[k], dl[0]), tol) << what << " CrossEntropy dlogits";
  }
  EXPECT_TRUE(test::bitwise_equal(out[1], out[2]) && test::bitwise_equal(dx[1], dx[2]) &&
              test::bitwise_equal(loss[1], loss[2]) && test::bitwise_equal(dl[1], dl[2]))
      << what << ": the two thread orders differ";
}

TEST(LaunchShapes, FastModeRowKernelsAtGpuShape) {
  const int shapes[][2] = {{1, 1}, {3, 31}, {5, 32}, {4, 33}, {9, 100}};
  for (const auto& s : shapes) {
    fast_rows_case<float>(s[0], s[1]);
    fast_rows_case<double>(s[0], s[1]);
  }
}

}  // namespace
}  // namespace minipipe
