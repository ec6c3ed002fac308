// DualPipeV (DeepSeek-V3 report; the V-shaped "cut-in-half" DualPipe of deepseek-ai/DualPipe) and
// the eight phases of one rank that it shares with bidirectional DualPipe (dualpipe.cpp).
#include "schedules/variant.hpp"
#include "schedules/variants/constructions.hpp"

namespace minipipe::sched::gen {

// The eight phases of one rank of DeepSeek's DualPipe family (deepseek-ai/DualPipe), shared by
// DualPipeV and bidirectional DualPipe. `half` ranks and `chunks` micro-batches per direction as
// that family counts them; this rank is `pos` of them (0 = the end that is fed first); its
// stage `first` is reached by the micro-batches it sees first, `second` by the others. Steady
// state pairs a forward of one stage with a full backward of the other in OVERLAP_F_B units; the
// warm-up tail and the cool-down use I/W splitting so deferred weight passes fill the drain.
void dualpipe_rank(RankBuilder& rb, int first, int second, int half, int pos, int chunks) {
  const int s0 = first, s1 = second;
  // 1: forwards of the first stage that fill the pipe ahead of this rank.
  for (int k = 0; k < 2 * (half - pos - 1); ++k) rb.forward(s0);
  // 2: forwards alternating between the two stages.
  for (int k = 0; k < pos + 1; ++k) {
    rb.forward(s0);
    rb.forward(s1);
  }
  // 3: second-stage input backward, its weight pass, next second-stage forward (zero-bubble style).
  for (int k = 0; k < half - pos - 1; ++k) {
    rb.input_backward(s1);
    rb.weight();
    rb.forward(s1);
  }
  // 4: steady state, two overlapped pairs per step. The middle rank runs its very first pair
  // unoverlapped: its backward can start only once its own forward has finished.
  for (int k = 0; k < chunks - 2 * half + pos + 1; ++k) {
    if (k == 0 && pos == half - 1) {
      rb.forward(s0);
      rb.full_backward(s1);
    } else {
      rb.overlapped(s0, s1);
    }
    rb.overlapped(s1, s0);
  }
  // 5: second-stage backwards with overlapped second-stage forward / first-stage backward.
  for (int k = 0; k < half - pos - 1; ++k) {
    rb.full_backward(s1);
    rb.overlapped(s1, s0);
  }
  // 6: backward pairs; the second half switches to I so its W's can fill the tail.
  bool split = false;
  const int n6 = pos + 1;
  for (int k = 0; k < n6; ++k) {
    if (k == n6 / 2 && pos % 2 == 1) split = true;
    rb.backward(s1, split);
    if (k == n6 / 2 && pos % 2 == 0) split = true;
    rb.backward(s0, split);
  }
  // 7: one deferred weight pass per remaining first-stage backward.
  for (int k = 0; k < half - pos - 1; ++k) {
    rb.weight();
    rb.backward(s0, split);
  }
  // 8: drain the weight passes.
  while (rb.weight()) {
  }
}

namespace {

// One model copy in V placement (rank r holds stages r and 2p-1-r), every micro-batch through both.
Rankwise gen_dualpipev(int p, int m) {
  return rankwise("dualpipev", p, m, 2, Placement::v, [p, m](int r, std::vector<Action>& row) {
    RankBuilder rb(row);
    dualpipe_rank(rb, r, 2 * p - 1 - r, p, r, m);
  });
}

}  // namespace

// Below m = 2p the m = 2p order restricted to m micro-batches.
Plan dualpipev(const VariantCall& c) {
  const int p = c.p, m = c.m;
  return {std::nullopt, m >= 2 * p ? gen_dualpipev(p, m) : keep_microbatches(gen_dualpipev(p, 2 * p), m)};
}

// DualPipe's claim, stated for F&B = F+B and B = I + W.
std::optional<double> dualpipev_bubble(const BubbleCase& c) {
  if (c.F != c.I || c.F != c.W) return std::nullopt;
  if (c.overlap != 1.0) return std::nullopt;
  // Full backwards cost B, split ones I + W; the claim is stated for B = I + W.
  if (c.B != c.I + c.W) return std::nullopt;
  const double p = c.p, m = c.m;
  const double b = (p - 1) * ((c.F + c.B) + c.B - 3 * c.W);
  return b / (2 * m * (c.F + c.B) + b);
}

}  // namespace minipipe::sched::gen
