// The tuner: enumerate, simulate with measured per-part costs (recompute's extra I time and its
// smaller stores included) scaled by the calibration's slowdown, add the step's fixed costs,
// filter by the memory cap, rank.
#include "miniapp/tuning/tuner.hpp"

#include <algorithm>

#include "miniapp/tuning/scale_model.hpp"
#include "schedules/schedules.hpp"
#include "schedules/split.hpp"

namespace minipipe {

namespace {

StageLayout layout_of(int n_layer, const std::vector<int>& split) {
  return make_stage_layout(n_layer, static_cast<int>(split.size()), std::vector<long long>(split.begin(), split.end()));
}

// Simulations per prediction when the calibration measured an action spread.
constexpr int kJitterSamples = 16;

}  // namespace

std::string split_text(const std::vector<int>& split) {
  std::string t;
  for (std::size_t i = 0; i < split.size(); ++i) t += (i ? "/" : "") + std::to_string(split[i]);
  return t;
}

double median(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

std::vector<double> rank_copy_sum_ms(const CostFile& costs, const StageLayout& layout,
                                     const std::vector<int>& stage_to_rank, int p) {
  std::vector<double> out(static_cast<std::size_t>(p), 0.0);
  const int S = layout.num_stages(), parts = layout.num_parts();
  if (S == parts || !costs.transfer_measured) return out;
  const double bytes = costs.mode == "deterministic" ? 4.0 * 4 * 8 : 2.0 * costs.real_bytes;  // passes x bytes
  const std::vector<double> elements = part_elements(costs.shape);                            // embedding, blocks, head
  for (int s = 0; s < S; ++s) {
    const double n = stage_sum(layout, s, elements);
    const int rank = stage_to_rank.at(static_cast<std::size_t>(s));
    const int twin = (s + parts) % S;  // the same part of the other copy
    const bool remote = stage_to_rank.at(static_cast<std::size_t>(twin)) != rank;
    out.at(static_cast<std::size_t>(rank)) += n * bytes * costs.ms_per_byte + (remote ? costs.latency_ms : 0.0);
  }
  return out;
}

TuneCandidate predict(const CostFile& costs, int p, const std::string& schedule, int v, int m,
                      const std::vector<int>& split, Recompute r, int schedule_cap) {
  sched::ScheduleOptions opt;
  opt.memory_cap = schedule_cap;
  const sched::Schedule s = sched::make_schedule(schedule, p, m, v, opt);
  const int samples = costs.batch / m;
  // `split` cuts one model copy into parts; DualPipe's two copies repeat it.
  const StageLayout layout = model_copies(layout_of(costs.shape.n_layer, split), s.chains);
  const sched::CostModel cm = stage_costs(costs, layout, samples, r);
  const sched::SimResult sim = sched::simulate(s, cm);
  std::vector<double> fixed = rank_fixed_ms(costs, layout, s.stage_to_rank, p);
  const std::vector<double> copies = rank_copy_sum_ms(costs, layout, s.stage_to_rank, p);
  for (std::size_t k = 0; k < fixed.size(); ++k) fixed[k] += copies[k];
  TuneCandidate c;
  c.schedule = schedule, c.v = s.v, c.m = m, c.split = split, c.recompute = r, c.memory_cap = schedule_cap;
  // With a measured action spread: the mean over jittered simulations (uneven actions add waits).
  c.makespan_ms = sched::mean_makespan(s, cm, kJitterSamples), c.bubble = sim.bubble_fraction;
  c.fixed_ms = *std::max_element(fixed.begin(), fixed.end());
  c.step_ms = c.makespan_ms + c.fixed_ms;
  for (double b : sim.busy) c.busy_ms += b;
  c.peak_bytes = *std::max_element(sim.activation_mem.begin(), sim.activation_mem.end());
  // The predicted budget: compute as simulated without the per-action overhead and spread, which
  // with the slower ranks' waits they cause are the predicted overhead.
  sched::CostModel pure = cm;
  pure.action_overhead = 0, pure.jitter_cv = 0, pure.comm = 0;
  std::vector<double> compute_s;
  for (double b : sched::simulate(s, pure).busy) compute_s.push_back(1e-3 * b);
  c.budget = time_budget(s, cm, cm.comm, compute_s, 1e-3 * c.makespan_ms);
  return c;
}

std::vector<TuneCandidate> enumerate_configs(const CostFile& costs, int p, int batch, double memory_cap,
                                             const std::vector<std::string>& names_in) {
  const std::vector<std::string> names = names_in.empty() ? sched::schedule_names() : names_in;
  const int L = costs.shape.n_layer;
  std::vector<TuneCandidate> out;
  for (const auto& name : names) {
    // Caps below the default only where memory binds, and only for schedules planned under one.
    const sched::VariantSpec* spec = sched::find_variant_spec(name);
    const bool capped = memory_cap > 0 && spec && (spec->knobs & sched::kMemoryCap);
    for (int cap = 0; cap < (capped ? p : 1); ++cap)
      for (int v = 1; v <= 4; ++v) {
        if (p * v % sched::model_copies(name) != 0) continue;
        const int S = p * v / sched::model_copies(name);  // model parts
        if (S > L) continue;
        for (int m = 1; m <= batch; ++m) {
          if (batch % m != 0) continue;
          sched::ScheduleOptions opt;
          opt.memory_cap = cap;
          try {
            (void)sched::make_schedule(name, p, m, v, opt);
          } catch (const sched::ScheduleError&) {
            continue;  // this schedule does not take (p, m, v) or finds no order under the cap
          }
          for (Recompute r : {Recompute::none, Recompute::attention, Recompute::block}) {
            const StageLayout even = make_stage_layout(L, S, {});
            const LayerTimes lt = layer_times(costs, batch / m, r);
            const std::vector<int> balanced = sched::balanced_split(lt.blocks, lt.embedding, lt.head, S);
            std::vector<std::pair<std::vector<int>, bool>> splits{{even.count, false}};
            if (balanced != even.count) splits.push_back({balanced, true});
            for (const auto& [split, is_auto] : splits) {
              TuneCandidate c = predict(costs, p, name, v, m, split, r, cap);
              c.auto_split = is_auto;
              if (memory_cap > 0 && c.peak_bytes > memory_cap) continue;
              out.push_back(std::move(c));
            }
          }
        }
      }
  }
  std::stable_sort(out.begin(), out.end(), [](const TuneCandidate& a, const TuneCandidate& b) {
    return a.step_ms != b.step_ms ? a.step_ms < b.step_ms : a.peak_bytes < b.peak_bytes;
  });
  return out;
}

std::vector<BubbleAnswer> smallest_m_for_bubble(const CostFile& costs, int p, int samples, double target, int max_m) {
  std::vector<BubbleAnswer> out;
  const int L = costs.shape.n_layer;
  for (const auto& name : sched::schedule_names()) {
    BubbleAnswer a;
    a.schedule = name;
    a.v = sched::default_v(name);
    const int S = p * a.v, copies = sched::model_copies(name);
    if (S / copies > L) continue;
    // Every stage the mean of the even split's stages: the closed forms' uniform-cost setting.
    const sched::CostModel even =
        stage_costs(costs, model_copies(make_stage_layout(L, S / copies, {}), copies), samples, Recompute::none);
    auto mean = [](const std::vector<double>& x) {
      double s = 0;
      for (double e : x) s += e / static_cast<double>(x.size());
      return s;
    };
    const sched::CostModel cm = sched::CostModel::uniform(S, mean(even.F), 0, mean(even.I), mean(even.W), 0);
    for (int m = 1; m <= max_m && a.m == 0; ++m) {
      sched::Schedule s;
      try {
        s = sched::make_schedule(name, p, m, a.v);
      } catch (const sched::ScheduleError&) {
        continue;
      }
      const double b = sched::simulate(s, cm).bubble_fraction;
      if (b < target) a.m = m, a.bubble = b;
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace minipipe
