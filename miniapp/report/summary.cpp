// Summaries of measured runs. Time inside observers (dump I/O) is neither compute nor pipeline
// idle: it is left out of both the per-rank idle and the bubble, the same way in each.
#include "miniapp/report/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "miniapp/report/time_budget.hpp"
#include "schedules/simulator.hpp"

namespace minipipe {

namespace {

double mean_of(const std::vector<double>& v) {
  double x = 0;
  for (double e : v) x += e / static_cast<double>(v.size());
  return x;
}

// Mean measured cost of each action kind per stage, in ms; a stage without split backward
// gets I = W = B/2, one without full backward B = I + W. W_rest, B_rest and W_tail split off
// the action that added a stage's held-back dW samples (its last W or B of a deterministic step
// of several micro-batches; none elsewhere): the means without it, and how much longer it ran.
struct StageCosts {
  std::vector<double> F, I, W, B, total;  // total: seconds of compute in the timed step
  std::vector<double> W_rest, B_rest, W_tail;
};

StageCosts stage_costs(const sched::Schedule& plan, const RunMeasurements& meas) {
  const int S = plan.num_stages();
  std::vector<double> sum[4], rest[4], last(S, 0);
  std::vector<int> count[4];
  std::vector<int> last_slot(S, -1);
  for (int k = 0; k < 4; ++k) sum[k].assign(S, 0), rest[k].assign(S, 0), count[k].assign(S, 0);
  auto slot = [](sched::Op op) { return op == sched::Op::F ? 0 : op == sched::Op::I ? 1 : op == sched::Op::W ? 2 : 3; };
  for (const auto& r : meas.ranks)
    for (const auto& a : r.actions) {
      if (a.stage < 0 || a.stage >= S) throw std::logic_error("summarize: measured action of unknown stage");
      const int k = slot(a.op);
      sum[k][a.stage] += a.end - a.start;
      ++count[k][a.stage];
      if (a.adds_held)
        last[a.stage] = a.end - a.start, last_slot[a.stage] = k;
      else
        rest[k][a.stage] += a.end - a.start;
    }
  StageCosts c;
  for (int s = 0; s < S; ++s) {
    auto mean = [&](int k) { return count[k][s] ? sum[k][s] / count[k][s] : 0.0; };
    // Without the tail action: the mean of the others of its kind (itself when it is alone).
    auto mean_rest = [&](int k) {
      const int n = count[k][s] - (last_slot[s] == k ? 1 : 0);
      return n > 0 ? rest[k][s] / n : mean(k);
    };
    const double f = mean(0), i = mean(1), w = mean(2);
    const double b = count[3][s] ? mean(3) : i + w;
    c.F.push_back(1e3 * f);
    c.I.push_back(1e3 * (count[1][s] ? i : b / 2));
    c.W.push_back(1e3 * (count[2][s] ? w : b / 2));
    c.B.push_back(1e3 * b);
    c.total.push_back(sum[0][s] + sum[1][s] + sum[2][s] + sum[3][s]);
    const double wr = mean_rest(2), br = count[3][s] ? mean_rest(3) : mean_rest(1) + wr;
    c.W_rest.push_back(1e3 * (count[2][s] ? wr : br / 2));
    c.B_rest.push_back(1e3 * br);
    c.W_tail.push_back(last_slot[s] < 0 ? 0.0 : 1e3 * std::max(0.0, last[s] - mean_rest(last_slot[s])));
  }
  return c;
}

// A run whose compute actions were only enqueued (profile.action_fence = false): their spans are
// enqueue times, so nothing built from them is reported (NaN: null in JSON, "n/a" in tables).
RunReport without_action_times(const sched::Schedule& plan, RunReport rep) {
  const double na = std::numeric_limits<double>::quiet_NaN();
  for (RankReport& rr : rep.ranks) rr.time_F = rr.time_I = rr.time_W = rr.time_B = rr.busy = rr.idle = na;
  rep.bubble_measured = rep.bubble_simulated = rep.imbalance = rep.action_cv = na;
  rep.stage_compute.clear();
  rep.budget = TimeBudget{};
  // The closed form is the schedule's own: with unit costs it needs no measurement.
  const int S = plan.num_stages();
  rep.bubble_analytic = sched::analytic_bubble(plan, sched::CostModel::uniform(S, 1, 2, 1, 1, 0));
  return rep;
}

}  // namespace

RunReport summarize(const RunContext& ctx, const sched::Schedule& plan, const RunMeasurements& meas) {
  if (meas.step_seconds.empty() || meas.makespans.size() != meas.step_seconds.size() ||
      static_cast<int>(meas.ranks.size()) != ctx.p)
    throw std::logic_error("summarize: need at least one step and the statistics of every rank");
  RunReport rep;
  rep.schedule = ctx.schedule;
  rep.p = ctx.p, rep.dp = ctx.dp, rep.v = plan.v, rep.m = ctx.m, rep.steps = ctx.steps, rep.batch = ctx.batch;
  rep.seq_len = ctx.seq_len, rep.first_step = ctx.first_step;
  rep.mode = ctx.mode, rep.backend = ctx.backend, rep.blas = ctx.blas, rep.gemm = ctx.gemm,
  rep.comm_path = ctx.comm_path, rep.gemm_blocking = ctx.gemm_blocking;
  rep.dump_path = ctx.dump_path;
  rep.losses = meas.losses;
  rep.step_seconds = meas.step_seconds;

  // Throughput counts whole steps (all-reduce and optimizer included); the first step warms up
  // (allocations, first touches) when there are several.
  const std::size_t first = meas.step_seconds.size() > 1 ? 1 : 0;
  double sum = 0;
  for (std::size_t i = first; i < meas.step_seconds.size(); ++i) sum += meas.step_seconds[i];
  rep.step_seconds_mean = sum / static_cast<double>(meas.step_seconds.size() - first);
  rep.tokens_per_second = static_cast<double>(ctx.batch) * ctx.seq_len / rep.step_seconds_mean;

  // The bubble is the pipeline's: its makespan, from the first action to the last.
  const double makespan = meas.makespans.back();
  rep.makespan = makespan;
  rep.makespans = meas.makespans;
  double busy_total = 0, observed_total = 0;
  for (int r = 0; r < ctx.p; ++r) {
    const RankStepStats& st = meas.ranks[static_cast<std::size_t>(r)];
    RankReport rr;
    rr.rank = r;
    rr.stages = plan.stages_of_rank(r);
    rr.time_F = st.time_F, rr.time_I = st.time_I, rr.time_W = st.time_W, rr.time_B = st.time_B;
    rr.comm_wait = st.comm_wait;
    rr.allreduce = st.allreduce;
    rr.allreduce_total = st.allreduce_total;
    rr.allreduce_bytes_per_element = st.allreduce_elements > 0 ? st.allreduce_bytes / st.allreduce_elements : 0.0;
    rr.busy = st.time_F + st.time_I + st.time_W + st.time_B;
    rr.dump_io = st.observer_io;
    rr.idle = makespan - rr.busy - rr.dump_io;
    rr.peak_stored_mb = st.peak_stored_mb;
    rr.peak_stored_bytes = static_cast<double>(st.peak_stored_bytes);
    rr.workspace_bytes = static_cast<double>(st.workspace_bytes);
    rr.host_syncs = st.host_syncs;
    busy_total += rr.busy;
    observed_total += rr.dump_io;
    rep.ranks.push_back(rr);
  }
  rep.bubble_measured = 1.0 - (busy_total + observed_total) / (ctx.p * makespan);
  rep.action_times = ctx.action_times;
  if (!ctx.action_times) return without_action_times(plan, std::move(rep));

  const StageCosts c = stage_costs(plan, meas);
  const int S = plan.num_stages();
  double mean_stage = 0, max_stage = 0;
  for (double t : c.total) mean_stage += t / S, max_stage = std::max(max_stage, t);
  rep.stage_compute = c.total;
  rep.imbalance = mean_stage > 0 ? max_stage / mean_stage : 1;
  {
    // The actions that added held-back dW samples are left out: a planned cost (the simulator's
    // W_tail), not a spread.
    std::map<std::pair<int, int>, std::pair<double, int>> kind;  // (op, stage) -> (sum, count)
    for (const auto& st : meas.ranks)
      for (const auto& a : st.actions) {
        if (a.adds_held) continue;
        auto& k = kind[{static_cast<int>(a.op), a.stage}];
        k.first += a.end - a.start, ++k.second;
      }
    double sq = 0;
    int n = 0;
    for (const auto& st : meas.ranks)
      for (const auto& a : st.actions) {
        if (a.adds_held) continue;
        const auto& k = kind[{static_cast<int>(a.op), a.stage}];
        const double mean = k.first / k.second;
        if (mean > 0) sq += ((a.end - a.start) / mean - 1) * ((a.end - a.start) / mean - 1), ++n;
      }
    rep.action_cv = n > 0 ? std::sqrt(sq / n) : 0.0;
  }

  // The simulator fed with the measured mean cost of each action kind per stage, each stage's
  // last W-carrying action apart (W_tail).
  sched::CostModel cost;
  cost.F = c.F, cost.I = c.I, cost.W = c.W_rest, cost.B = c.B_rest, cost.W_tail = c.W_tail;
  rep.bubble_simulated = sched::simulate(plan, cost).bubble_fraction;
  // The same costs, the stage means of them and the link measured in this run: the time budget.
  {
    std::vector<double> compute;
    for (const auto& rr : rep.ranks) compute.push_back(rr.busy);
    const LinkEstimate link = measured_link(meas.ranks);
    rep.budget = time_budget(plan, cost, link.latency_ms, compute, makespan);
    rep.budget.link_samples = link.samples;
    for (const auto& st : meas.ranks)
      rep.budget.allreduce.push_back(st.allreduce), rep.budget.optimizer.push_back(st.optimizer);
  }
  // The closed form assumes every stage costs the same: feed it the stage-mean of the measured
  // costs, or, where the formula also needs F = I = W (ZB-H2, ZB-V, DualPipeV), unit costs.
  rep.bubble_analytic = sched::analytic_bubble(
      plan, sched::CostModel::uniform(S, mean_of(c.F), mean_of(c.B), mean_of(c.I), mean_of(c.W), 0));
  if (!rep.bubble_analytic)
    rep.bubble_analytic = sched::analytic_bubble(plan, sched::CostModel::uniform(S, 1, 2, 1, 1, 0));
  return rep;
}

sched::Timeline measured_timeline(const RunContext& ctx, const sched::Schedule& plan, const RunMeasurements& meas) {
  sched::Timeline tl;
  tl.p = ctx.p;
  tl.title = "measured: " + ctx.schedule + " p=" + std::to_string(ctx.p) + " v=" + std::to_string(plan.v) +
             " m=" + std::to_string(ctx.m) + " (last step, ms)";
  for (std::size_t r = 0; r < meas.ranks.size(); ++r) {
    const RankStepStats& st = meas.ranks[r];
    for (const auto& a : st.actions)
      tl.events.push_back({static_cast<int>(r), 1e3 * a.start, 1e3 * a.end, a.op, a.stage, a.microbatch});
    if (st.allreduce > 0) {
      sched::TimelineEvent e;
      e.rank = static_cast<int>(r), e.start = 1e3 * st.allreduce_start,
      e.end = 1e3 * (st.allreduce_start + st.allreduce);
      e.label = "all-reduce";
      tl.events.push_back(e);
    }
  }
  return tl;
}

}  // namespace minipipe
