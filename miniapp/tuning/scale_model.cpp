// The scaling model: costs (measured, or from FLOPs and bytes), placement of p x dp ranks on a
// cluster's nodes, each boundary charged to the link it crosses, the gradient all-reduce after the
// pipeline as the trainer runs it, and a pruned sweep over the layouts.
#include "miniapp/tuning/scale_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "miniapp/model/model.hpp"
#include "schedules/schedules.hpp"
#include "schedules/split.hpp"

namespace minipipe {

namespace {

std::size_t numel(const std::vector<ParamSpec>& ps) {
  std::size_t n = 0;
  for (const auto& p : ps) n += p.numel();
  return n;
}

// Bytes a device holds per parameter element besides activations: the value, AdamW's m and v,
// and the gradient (deterministic: the 128-bit exact accumulator and the float gradient; fast: the
// float sum and the gradient).
double state_bytes_per_element(bool deterministic) {
  return 4 + 8 + (deterministic ? 16 + 4 : 4 + 4);
}

CostFile scaled(CostFile c, double speedup) {
  if (speedup == 1) return c;
  for (auto& sc : c.sizes)
    for (auto& part : sc.parts)
      for (auto& pc : part) pc.F /= speedup, pc.I /= speedup, pc.W /= speedup, pc.W_tail /= speedup;
  for (double& x : c.step_fixed_ms) x /= speedup;
  c.calibration.action_overhead_ms /= speedup;
  return c;
}

StageLayout layout_of(int n_layer, const std::vector<int>& split) {
  return make_stage_layout(n_layer, static_cast<int>(split.size()), std::vector<long long>(split.begin(), split.end()));
}

// Link kind of each boundary of replica d: 0 same rank, 1 inside a node, 2 between nodes.
std::vector<int> boundary_kinds(const Cluster& cl, const std::vector<int>& stage_to_rank, int p, int dp, int d) {
  const std::size_t S = stage_to_rank.size();
  std::vector<int> kind(S > 0 ? S - 1 : 0);
  for (std::size_t b = 0; b + 1 < S; ++b) {
    const int ra = cl.rank_of(d, stage_to_rank[b], p, dp), rb = cl.rank_of(d, stage_to_rank[b + 1], p, dp);
    kind[b] = ra == rb ? 0 : cl.node_of_rank(ra) == cl.node_of_rank(rb) ? 1 : 2;
  }
  return kind;
}

// The distinct patterns over the replicas: replicas with one pattern run the same pipeline.
std::vector<std::vector<int>> boundary_patterns(const Cluster& cl, const std::vector<int>& stage_to_rank, int p,
                                                int dp) {
  std::set<std::vector<int>> seen;
  for (int d = 0; d < dp; ++d) seen.insert(boundary_kinds(cl, stage_to_rank, p, dp, d));
  return {seen.begin(), seen.end()};
}

// Whether the dp replicas of pipeline rank pp span more than one node (then the all-reduce's
// slowest link is the inter-node one).
bool group_spans_nodes(const Cluster& cl, int pp, int p, int dp) {
  const int node0 = cl.node_of_rank(cl.rank_of(0, pp, p, dp));
  for (int d = 1; d < dp; ++d)
    if (cl.node_of_rank(cl.rank_of(d, pp, p, dp)) != node0) return true;
  return false;
}

double allreduce_ms(const Cluster& cl, int n, double bytes, const Link& link) {
  return cl.allreduce == AllReduceAlgo::ring ? ring_allreduce_ms(n, bytes, link) : tree_allreduce_ms(n, bytes, link);
}

constexpr int kJitterSamples = 16;  // as the tuner: the mean of this many jittered simulations

struct Evaluated {
  double makespan = 0, bubble = 0, step = 0, allreduce = 0, memory = 0;
  bool fits = false;
};

// The model of one configuration. `kinds` are its replicas' boundary patterns; zero_links
// charges no transfer (for the exposed-communication figure).
Evaluated evaluate(const sched::RankPrograms& s, const sched::CostModel& base,
                   const std::vector<std::vector<int>>& kinds, const Cluster& cl, double boundary_bytes,
                   const std::vector<double>& rank_state, const std::vector<double>& rank_ar, double fixed_ms,
                   double loss_ms, bool overlap, double cap, bool zero_links) {
  Evaluated e;
  sched::CostModel cm = base;
  const Link* by_kind[3] = {nullptr, &cl.intra, &cl.inter};
  std::vector<double> end;
  for (const auto& kind : kinds) {
    cm.boundary.assign(kind.size(), 0.0);
    for (std::size_t b = 0; b < kind.size(); ++b)
      if (kind[b] && !zero_links) cm.boundary[b] = by_kind[kind[b]]->transfer_ms(boundary_bytes);
    if (cm.boundary.empty()) cm.comm = 0;
    sched::StepTotals t = sched::simulate_totals(s, cm);
    if (cm.jitter_cv > 0) {  // the mean of jittered makespans, as mean_makespan does
      double sum = 0;
      for (int k = 1; k <= kJitterSamples; ++k) {
        cm.jitter_seed = static_cast<unsigned long long>(k);
        sum += sched::simulate_totals(s, cm).makespan;
      }
      t.makespan = sum / kJitterSamples;
    }
    for (std::size_t r = 0; r < t.activation_mem.size(); ++r)
      e.memory = std::max(e.memory, rank_state[r] + t.activation_mem[r]);
    if (t.makespan >= e.makespan) e.makespan = t.makespan, e.bubble = t.bubble_fraction, end = t.end;
  }
  e.allreduce = *std::max_element(rank_ar.begin(), rank_ar.end());
  double pipeline_and_reduce = e.makespan + e.allreduce;
  if (overlap) {  // each rank's all-reduce starts when its own last action ends
    pipeline_and_reduce = e.makespan;
    for (std::size_t r = 0; r < end.size(); ++r)
      pipeline_and_reduce = std::max(pipeline_and_reduce, end[r] + rank_ar[r]);
  }
  e.step = pipeline_and_reduce + loss_ms + fixed_ms;
  e.fits = cap <= 0 || e.memory <= cap;
  return e;
}

// A schedule generator's (p, m, v) instance as rank programs (the simulation then holds about
// one rank's actions, not the whole schedule), or nullopt where it has none.
std::optional<sched::RankPrograms> try_schedule(const std::string& name, int p, int m, int v) {
  try {
    return sched::make_rank_programs(name, p, m, v);
  } catch (const sched::ScheduleError&) {
    return std::nullopt;
  }
}

// The splits tried for S stages: the even one, and the balanced one of the measured per-layer
// times where it differs (flagged auto).
std::vector<std::pair<std::vector<int>, bool>> candidate_splits(const CostFile& costs, int n, Recompute r, int L,
                                                                int S) {
  const LayerTimes lt = layer_times(costs, n, r);
  const std::vector<int> even = make_stage_layout(L, S, {}).count;
  const std::vector<int> balanced = sched::balanced_split(lt.blocks, lt.embedding, lt.head, S);
  std::vector<std::pair<std::vector<int>, bool>> splits{{even, false}};
  if (balanced != even) splits.push_back({balanced, true});
  return splits;
}

// Per pipeline rank of a layout: the model state it holds, its gradient all-reduce, and the
// fullest rank's state.
struct RankShares {
  std::vector<double> state, ar;
  double worst_state = 0;
};

RankShares rank_shares(const Cluster& cl, const StageLayout& layout, const std::vector<int>& stage_to_rank,
                       const std::vector<double>& elements, int p, int dp, bool det) {
  const int S = static_cast<int>(layout.count.size());
  // Per pipeline rank: parameter elements, the state they need, their all-reduce.
  std::vector<double> rank_el(static_cast<std::size_t>(p), 0.0);
  for (int st = 0; st < S; ++st) {
    double e = st == 0 ? elements.front() : 0.0;
    for (int l = layout.first[st]; l < layout.first[st] + layout.count[st]; ++l) e += elements[1 + l];
    if (st == S - 1) e += elements.back();
    rank_el[static_cast<std::size_t>(stage_to_rank[st])] += e;
  }
  RankShares out;
  out.state.resize(rank_el.size()), out.ar.resize(rank_el.size());
  for (int q = 0; q < p; ++q) {
    const double el = rank_el[static_cast<std::size_t>(q)];
    out.state[q] =
        el * state_bytes_per_element(det) + (det && dp > 1 ? std::min(el, 1048576.0) * 32 : 0.0);  // the limb buffer
    out.worst_state = std::max(out.worst_state, out.state[q]);
    const Link& link = group_spans_nodes(cl, q, p, dp) ? cl.inter : cl.intra;
    out.ar[q] = allreduce_ms(cl, dp, el * allreduce_bytes_per_element(det), link);
  }
  return out;
}

// The busiest rank's compute: m forwards and backwards of each of its stages, and the W tail.
double busiest_rank_ms(const sched::CostModel& cm, const sched::RankPrograms& s, int p, int S, int m) {
  const sched::CostModel rc = cm.resolved(S, s.v);
  std::vector<double> busy(static_cast<std::size_t>(p), 0.0);
  for (int st = 0; st < S; ++st)
    busy[static_cast<std::size_t>(s.stage_to_rank[st])] += m * (rc.F[st] + rc.B[st]) + rc.W_tail[st];
  return *std::max_element(busy.begin(), busy.end());
}

// The loss sums of every sample, agreed over the replicas (trainer.cpp gather_loss).
double loss_agreement_ms(const Cluster& cl, int p, int dp, int G) {
  return dp > 1 ? tree_allreduce_ms(dp, 12.0 * G, group_spans_nodes(cl, 0, p, dp) ? cl.inter : cl.intra) : 0.0;
}

// A configuration and what evaluate() predicts for it (exposed_comm_ms left to the caller).
ScalePoint point_of(const Evaluated& e, const std::string& name, int p, int dp, int v, int m, Recompute r, bool is_auto,
                    const std::vector<int>& split, int G, RankOrder order) {
  ScalePoint pt;
  pt.schedule = name, pt.p = p, pt.dp = dp, pt.v = v, pt.m = m, pt.recompute = r;
  pt.auto_split = is_auto, pt.split = split;
  pt.step_ms = e.step, pt.makespan_ms = e.makespan, pt.bubble = e.bubble;
  pt.allreduce_ms = e.allreduce, pt.memory_bytes = e.memory;
  pt.samples_per_s = G / (e.step / 1e3), pt.global_batch = G;
  pt.order = order;
  return pt;
}

// Adds pt to the best, sorted by time per sample (the step over its global batch: strong and weak
// points compare), and keeps the first `keep`.
void keep_best(std::vector<ScalePoint>& best, const ScalePoint& pt, int keep) {
  auto per_sample = [](const ScalePoint& x) { return x.step_ms / x.global_batch; };
  best.push_back(pt);
  // Ties (a bubble-free p = 1 at any m, say) go to the smaller memory.
  std::stable_sort(best.begin(), best.end(), [&](const ScalePoint& a, const ScalePoint& b) {
    return per_sample(a) != per_sample(b) ? per_sample(a) < per_sample(b) : a.memory_bytes < b.memory_bytes;
  });
  if (static_cast<int>(best.size()) > keep) best.pop_back();
}

}  // namespace

std::vector<double> part_elements(const ModelShape& s) {
  std::vector<double> out{static_cast<double>(numel(embedding_params(s)))};
  for (int l = 0; l < s.n_layer; ++l) out.push_back(static_cast<double>(numel(block_params(s, l))));
  out.push_back(static_cast<double>(numel(head_params(s))));
  return out;
}

double allreduce_bytes_per_element(bool deterministic) {
  return deterministic ? 32 : 4;
}

std::vector<double> boundary_ms(const Cluster& cl, const std::vector<int>& stage_to_rank, int p, int dp, int replica,
                                double bytes) {
  std::vector<double> t;
  for (int k : boundary_kinds(cl, stage_to_rank, p, dp, replica))
    t.push_back(k == 0 ? 0.0 : (k == 1 ? cl.intra : cl.inter).transfer_ms(bytes));
  return t;
}

CostFile analytic_costs(const ModelShape& shape, int batch, bool deterministic, const Cluster& cl) {
  if (!(cl.tflops > 0))
    throw InputError("cluster file " + cl.origin +
                     ": key 'device.tflops' is missing; allowed: a number > 0 (needed without --costs)");
  if (!(cl.memory_bytes_per_ms > 0))
    throw InputError("cluster file " + cl.origin +
                     ": key 'device.memory_bandwidth_gbs' is missing; allowed: a number > 0 (needed without --costs)");
  CostFile c;
  c.shape = shape;
  c.batch = batch;
  c.backend = "analytic";
  c.mode = deterministic ? "deterministic" : "fast";
  c.comm_path = "model";
  const double T = shape.seq_len, C = shape.channels, V = shape.vocab, H = shape.n_head, L = shape.n_layer;
  const double flops_per_ms = cl.tflops * 1e9, f = 4;  // float32 values
  // A block: its four linears 2T(3C^2 + C^2 + 4C^2 + 4C^2) = 24TC^2, attention's two products 4T^2C.
  const double lin = 24 * T * C * C, att = 4 * T * T * C;
  const double bF = (lin + att) / flops_per_ms, bW = lin / flops_per_ms, bI = (lin + 2 * att) / flops_per_ms;
  // The head: the LM head's 2TCV each way.
  const double head = 2 * T * C * V / flops_per_ms;
  SizeCosts sc;
  sc.samples = 1;
  sc.parts.resize(static_cast<std::size_t>(L + 2));
  for (int l = 1; l <= L; ++l) {
    auto& b = sc.parts[static_cast<std::size_t>(l)];
    // none keeps every forward value (16 TC floats and the H T^2 probabilities); attention all but
    // the probabilities and their output; block only the block's input. I's work until W: the
    // linears' output gradients (9TC), and what recompute remade.
    b[0] = {bF, bI, bW, f * (16 * T * C + H * T * T), f * 9 * T * C, 0};
    b[1] = {bF, bI + att / flops_per_ms, bW, f * 15 * T * C, f * (10 * T * C + H * T * T), 0};
    b[2] = {bF, bI + bF, bW, f * T * C, f * (24 * T * C + H * T * T), 0};
  }
  auto& h = sc.parts.back();
  h[0] = h[1] = {head, head, head, f * (2 * T * C + V * T), f * V * T, 0};
  h[2] = {head, 2 * head, head, f * T * C, f * (V * T + 2 * T * C), 0};
  // The embedding is a gather and a scatter-add: bandwidth, not FLOPs.
  const double emb = f * T * C / cl.memory_bytes_per_ms;
  for (auto& e : sc.parts.front()) e = {emb, 0, emb, 0, 0, 0};
  c.sizes.push_back(std::move(sc));
  // Per step: zeroing, finalize and the AdamW update read and write each element's state once.
  const double per_element = deterministic ? 68 : 36;
  for (double n : part_elements(shape)) c.step_fixed_ms.push_back(n * per_element / cl.memory_bytes_per_ms);
  return c;
}

std::vector<ScalePoint> best_layouts(const CostFile& costs_in, const Cluster& cluster_in, int devices,
                                     const ScaleOptions& opt, int keep, SweepCount* count) {
  const CostFile costs = scaled(costs_in, cluster_in.speedup);
  const ModelShape& shape = costs.shape;
  const int L = shape.n_layer;
  const bool det = costs.mode != "fast";
  const std::vector<double> elements = part_elements(shape);
  const std::vector<std::string> names = opt.schedules.empty() ? sched::schedule_names() : opt.schedules;
  std::vector<RankOrder> orders{cluster_in.order};
  if (cluster_in.any_order) orders = {RankOrder::dp_major, RankOrder::pp_major};
  std::vector<ScalePoint> best;
  auto bound = [&] {
    return static_cast<int>(best.size()) < keep ? std::numeric_limits<double>::infinity()
                                                : best.back().step_ms / best.back().global_batch;
  };
  SweepCount n_run;
  long long& sims = n_run.simulations;
  for (int p = 1; p <= std::min(devices, L); ++p) {
    if (devices % p) continue;
    const int dp = devices / p;
    const int G = opt.batch_per_replica > 0 ? opt.batch_per_replica * dp : opt.global_batch;
    if (G % dp) {
      n_run.uneven_dp.push_back(dp);
      continue;
    }
    // Each (schedule, m, v) instance is built once for both rank orders: the list-scheduled
    // variants (v-half, v-min, zb-mem) cost most of a sweep's time to build.
    std::map<std::tuple<std::string, int, int>, std::optional<sched::RankPrograms>> made_at_p;
    const int Br = G / dp;
    for (RankOrder order : orders) {
      if (dp == 1 && order == RankOrder::pp_major && orders.size() > 1) continue;  // the same placement
      Cluster cl = cluster_in;
      cl.order = order;
      for (const auto& name : names)
        for (int v = 1; v <= 4; ++v) {
          // The per-rank state and busiest-rank bounds below count one model copy: DualPipe's two
          // copies (model_copies 2) are left to `minipipe tune`.
          if (sched::model_copies(name) != 1) continue;
          const int S = p * v;
          if (S > L) continue;
          for (int m = 1; m <= std::min(Br, opt.max_m); ++m) {
            if (Br % m) continue;
            if (opt.list_scheduled_max_pm > 0 && list_scheduled(name) &&
                static_cast<long long>(p) * m > opt.list_scheduled_max_pm) {
              ++n_run.list_scheduled_skipped;
              continue;
            }
            const auto key = std::make_tuple(name, m, v);
            auto at = made_at_p.find(key);
            if (at == made_at_p.end()) at = made_at_p.emplace(key, try_schedule(name, p, m, v)).first;
            const std::optional<sched::RankPrograms>& made = at->second;
            if (!made) continue;
            const sched::RankPrograms& s = *made;
            if (s.v != v) continue;
            const std::vector<std::vector<int>> kinds = boundary_patterns(cl, s.stage_to_rank, p, dp);
            const int n = Br / m;
            const double boundary_bytes = static_cast<double>(n) * shape.seq_len * shape.channels * costs.real_bytes;
            for (Recompute r : {Recompute::none, Recompute::attention, Recompute::block}) {
              for (const auto& [split, is_auto] : candidate_splits(costs, n, r, L, S)) {
                const StageLayout layout = layout_of(L, split);
                sched::CostModel cm = stage_costs(costs, layout, n, r);
                const RankShares shares = rank_shares(cl, layout, s.stage_to_rank, elements, p, dp, det);
                const std::vector<double>&state = shares.state, &ar = shares.ar;
                if (opt.memory_cap > 0 && shares.worst_state > opt.memory_cap) {
                  ++n_run.over_cap;
                  continue;
                }
                ++n_run.configurations;
                const std::vector<double> fixed = rank_fixed_ms(costs, layout, s.stage_to_rank, p);
                const double fixed_ms = *std::max_element(fixed.begin(), fixed.end());
                const double loss_ms = loss_agreement_ms(cl, p, dp, G);
                // Lower bound: the busiest rank's compute, then the all-reduce and the fixed cost.
                const double lower = busiest_rank_ms(cm, s, p, S, m) +
                                     (opt.overlap_allreduce ? 0.0 : *std::max_element(ar.begin(), ar.end())) + loss_ms +
                                     fixed_ms;
                if (opt.prune && lower / G >= bound()) continue;
                const Evaluated e = evaluate(s, cm, kinds, cl, boundary_bytes, state, ar, fixed_ms, loss_ms,
                                             opt.overlap_allreduce, opt.memory_cap, false);
                sims += static_cast<long long>(kinds.size()) * (cm.jitter_cv > 0 ? kJitterSamples + 1 : 1);
                if (!e.fits) {
                  ++n_run.over_cap;
                  continue;
                }
                ScalePoint pt = point_of(e, name, p, dp, s.v, m, r, is_auto, split, G, order);
                // Exposed communication: what the step loses to transfers and all-reduces.
                const Evaluated bare = evaluate(s, cm, kinds, cl, boundary_bytes, state,
                                                std::vector<double>(ar.size(), 0.0), fixed_ms, 0.0, false, 0, true);
                pt.exposed_comm_ms = e.step - bare.step;
                sims += static_cast<long long>(kinds.size());
                keep_best(best, pt, keep);
              }
            }
          }
        }
    }
  }
  if (count) *count = n_run;
  return best;
}

bool list_scheduled(const std::string& name) {
  return name == "v-half" || name == "v-min" || name == "zb-mem";
}

std::string no_configuration_reason(const SweepCount& count, int global_batch) {
  std::string why;
  if (!count.uneven_dp.empty()) {
    std::string dps;
    for (int dp : count.uneven_dp) dps += (dps.empty() ? "" : ", ") + std::to_string(dp);
    why = "the global batch " + std::to_string(global_batch) + " does not split evenly over dp = " + dps +
          " replicas (devices / p); use a global batch that is a multiple of one of them";
  }
  if (count.over_cap > 0)
    why += std::string(why.empty() ? "" : "; ") + std::to_string(count.over_cap) +
           " configuration(s) over the memory cap: raise --memory-cap or the devices";
  if (why.empty()) why = "no schedule of --schedules has an instance at these p, v and m (p*v <= n_layer)";
  return why;
}

}  // namespace minipipe
