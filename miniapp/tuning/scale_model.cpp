// The scaling model: costs (measured, or from FLOPs and bytes), placement of p x dp ranks on a
// cluster's nodes, each boundary charged to the link it crosses, the gradient all-reduce (each
// stage's overlapping the pipeline, or after it), and a pruned sweep over the layouts.
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

// How the dp replicas of pipeline rank pp (its data-parallel group) sit on the nodes: on `nodes`
// nodes, between k_min and k_max of them on each.
struct GroupPlacement {
  int nodes = 1, k_min = 1, k_max = 1;
};

GroupPlacement group_placement(const Cluster& cl, int pp, int p, int dp) {
  std::map<int, int> per_node;
  for (int d = 0; d < dp; ++d) ++per_node[cl.node_of_rank(cl.rank_of(d, pp, p, dp))];
  GroupPlacement g;
  g.nodes = static_cast<int>(per_node.size());
  g.k_min = dp, g.k_max = 1;
  for (const auto& [node, k] : per_node) g.k_min = std::min(g.k_min, k), g.k_max = std::max(g.k_max, k);
  return g;
}

// Whether the dp replicas of pipeline rank pp span more than one node (then the all-reduce's
// slowest link is the inter-node one).
bool group_spans_nodes(const Cluster& cl, int pp, int p, int dp) {
  return group_placement(cl, pp, p, dp).nodes > 1;
}

// The all-reduce of `bytes` over the dp group of pipeline rank pp. Flat ring or tree: over the
// group's slowest link. Hierarchical: a ring inside each node and one across the nodes
// (hierarchical_allreduce); where nodes hold unequal shares, the fullest node's ring inside and the
// emptiest node's (largest) shard across.
double allreduce_ms(const Cluster& cl, int pp, int p, int dp, double bytes) {
  if (dp <= 1) return 0;
  const GroupPlacement g = group_placement(cl, pp, p, dp);
  const Link& slowest = g.nodes > 1 ? cl.inter : cl.intra;
  switch (cl.allreduce) {
    case AllReduceAlgo::ring:
      return ring_allreduce_ms(dp, bytes, slowest);
    case AllReduceAlgo::tree:
      return tree_allreduce_ms(dp, bytes, slowest);
    case AllReduceAlgo::hierarchical:
      if (g.nodes == 1) return ring_allreduce_ms(dp, bytes, cl.intra);
      return hierarchical_allreduce(g.k_max, g.nodes, bytes, cl.intra, cl.inter).intra_ms +
             hierarchical_allreduce(g.k_min, g.nodes, bytes, cl.intra, cl.inter).inter_ms;
  }
  return 0;
}

constexpr int kJitterSamples = 16;  // as the tuner: the mean of this many jittered simulations

struct Evaluated {
  double makespan = 0, bubble = 0, step = 0, allreduce = 0, memory = 0;
  bool fits = false;
  bool pruned = false;  // its step reaches prune_at before the overlap is placed: not evaluated further
};

// Per pipeline rank of a layout: the model state it holds, its gradient all-reduce (one reduction
// of all its parameters, after the pipeline), each stage's own all-reduce (the overlapped model:
// one reduction per stage, over the group of the stage's rank), and the fullest rank's state.
struct RankShares {
  std::vector<double> state, ar, stage_ar;
  double worst_state = 0;
};

// The model of one configuration. `kinds` are its replicas' boundary patterns; zero_links
// charges no transfer and no all-reduce (for the exposed-communication figure). A step that
// reaches prune_at without the overlapped all-reduce is left unfinished (pruned): placing the
// overlap needs a full simulation where a rank holds several stages.
Evaluated evaluate(const sched::RankPrograms& s, const sched::CostModel& base,
                   const std::vector<std::vector<int>>& kinds, const Cluster& cl, double boundary_bytes,
                   const RankShares& shares, double fixed_ms, double loss_ms, AllReduceTiming timing, double cap,
                   bool zero_links, double prune_at = std::numeric_limits<double>::infinity()) {
  Evaluated e;
  sched::CostModel cm = base;
  const Link* by_kind[3] = {nullptr, &cl.intra, &cl.inter};
  const int p = s.p, S = s.num_stages();
  std::vector<double> rank_reduce(static_cast<std::size_t>(p), 0.0);  // overlapped: a rank's reductions, summed
  for (int st = 0; st < S; ++st) rank_reduce[static_cast<std::size_t>(s.stage_to_rank[st])] += shares.stage_ar[st];
  const bool overlap = timing == AllReduceTiming::overlapped && !zero_links &&
                       *std::max_element(shares.stage_ar.begin(), shares.stage_ar.end()) > 0;
  double pipeline_and_reduce = 0;
  for (const auto& kind : kinds) {
    cm.boundary.assign(kind.size(), 0.0);
    for (std::size_t b = 0; b < kind.size(); ++b)
      if (kind[b] && !zero_links) cm.boundary[b] = by_kind[kind[b]]->transfer_ms(boundary_bytes);
    if (cm.boundary.empty()) cm.comm = 0;
    sched::StepTotals t = sched::simulate_totals(s, cm);
    // Overlapped: what the reductions add past this pattern's makespan (each stage's starting when
    // its last B or W ends). One stage per rank: that is the rank's last action.
    double tail = 0;
    if (overlap && cm.jitter_cv == 0 && t.makespan + loss_ms + fixed_ms >= prune_at) {
      e.pruned = true;
      return e;
    }
    if (overlap) {
      std::vector<double> ready(static_cast<std::size_t>(S));
      if (S == p)
        for (int st = 0; st < S; ++st) ready[st] = t.end[static_cast<std::size_t>(s.stage_to_rank[st])];
      else
        ready = stage_gradients_ready(s, cm);
      for (double end : overlapped_allreduce_end(ready, shares.stage_ar, s.stage_to_rank, p))
        tail = std::max(tail, end - t.makespan);
    }
    if (cm.jitter_cv > 0) {  // the mean of jittered makespans, as mean_makespan does
      double sum = 0;
      for (int k = 1; k <= kJitterSamples; ++k) {
        cm.jitter_seed = static_cast<unsigned long long>(k);
        sum += sched::simulate_totals(s, cm).makespan;
      }
      t.makespan = sum / kJitterSamples;
    }
    for (std::size_t r = 0; r < t.activation_mem.size(); ++r)
      e.memory = std::max(e.memory, shares.state[r] + t.activation_mem[r]);
    if (t.makespan >= e.makespan) e.makespan = t.makespan, e.bubble = t.bubble_fraction;
    pipeline_and_reduce = std::max(pipeline_and_reduce, t.makespan + tail);
  }
  if (zero_links) {
    e.allreduce = 0;
  } else if (overlap) {
    e.allreduce = *std::max_element(rank_reduce.begin(), rank_reduce.end());
  } else {
    e.allreduce = *std::max_element(shares.ar.begin(), shares.ar.end());
    pipeline_and_reduce = e.makespan + e.allreduce;
  }
  e.step = pipeline_and_reduce + loss_ms + fixed_ms;
  e.fits = cap <= 0 || e.memory <= cap;
  return e;
}

// The chunk counts v a sweep tries at p, up to v_max = n_layer / p (one block a chunk): 1 .. 4, then
// about 1.5x apart (6, 8, 12, 16, 24, ...) and v_max itself, so a 128-layer sweep builds 15 values
// of v at p = 1, not 128.
std::vector<int> chunk_counts(int v_max) {
  std::vector<int> out;
  for (int v = 1; v <= std::min(4, v_max); ++v) out.push_back(v);
  for (int a = 6, b = 8; a <= v_max; a *= 2, b *= 2) {
    out.push_back(a);
    if (b <= v_max) out.push_back(b);
  }
  if (out.back() != v_max) out.push_back(v_max);
  return out;
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

RankShares rank_shares(const Cluster& cl, const StageLayout& layout, const std::vector<int>& stage_to_rank,
                       const std::vector<double>& elements, int p, int dp, bool det, double bytes_per_element) {
  const int S = static_cast<int>(layout.count.size());
  // Per pipeline rank: parameter elements, the state they need, their all-reduce.
  std::vector<double> rank_el(static_cast<std::size_t>(p), 0.0);
  RankShares out;
  out.stage_ar.resize(static_cast<std::size_t>(S));
  for (int st = 0; st < S; ++st) {
    const double e = stage_sum(layout, st, elements);
    rank_el[static_cast<std::size_t>(stage_to_rank[st])] += e;
    out.stage_ar[st] = allreduce_ms(cl, stage_to_rank[st], p, dp, e * bytes_per_element);
  }
  out.state.resize(rank_el.size()), out.ar.resize(rank_el.size());
  for (int q = 0; q < p; ++q) {
    const double el = rank_el[static_cast<std::size_t>(q)];
    out.state[q] =
        el * state_bytes_per_element(det) + (det && dp > 1 ? std::min(el, 1048576.0) * 32 : 0.0);  // the limb buffer
    out.worst_state = std::max(out.worst_state, out.state[q]);
    out.ar[q] = allreduce_ms(cl, q, p, dp, el * bytes_per_element);
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

double allreduce_bytes_per_element(bool deterministic, double exact_bytes) {
  return deterministic ? exact_bytes : 4;
}

std::vector<double> stage_gradients_ready(const sched::RankPrograms& s, const sched::CostModel& cm) {
  const sched::SimResult r = sched::simulate(sched::to_schedule(s), cm);
  std::vector<double> ready(static_cast<std::size_t>(s.num_stages()), 0.0);
  for (const auto& ev : r.timeline.events)
    if (ev.label.empty() && (ev.op == sched::Op::B || ev.op == sched::Op::W))
      ready[static_cast<std::size_t>(ev.stage)] = std::max(ready[static_cast<std::size_t>(ev.stage)], ev.end);
  return ready;
}

std::vector<double> overlapped_allreduce_end(const std::vector<double>& ready, const std::vector<double>& stage_ar,
                                             const std::vector<int>& stage_to_rank, int p) {
  std::vector<int> order(ready.size());
  for (std::size_t st = 0; st < order.size(); ++st) order[st] = static_cast<int>(st);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ready[a] < ready[b]; });
  std::vector<double> end(static_cast<std::size_t>(p), 0.0);
  for (int st : order) {
    double& t = end[static_cast<std::size_t>(stage_to_rank[st])];
    t = std::max(t, ready[st]) + stage_ar[st];
  }
  return end;
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
  // The memory-bound kernels at the device's bandwidth, from the values each reads and writes.
  // F: two LayerNorms (x in, y out, mean and rstd: 2TC + 2T each), softmax (scores in, probabilities
  // out: 2HT^2), GELU (4TC in and out: 8TC), two residual adds (3TC each). I: the LayerNorms'
  // backward (x, dy, stats in, dx out: 3TC + 2T each), softmax's (P, dP in, dS out: 3HT^2), GELU's
  // (x, dy in, dx out: 12TC), the residual gradients (3TC each). W: the LayerNorms' weight and bias
  // gradients (x and dy in: 2TC each).
  const double per_value_ms = f / cl.memory_bytes_per_ms;
  const double softmax_F = 2 * H * T * T;
  const double mF = (18 * T * C + 4 * T + softmax_F) * per_value_ms,
               mI = (24 * T * C + 4 * T + 3 * H * T * T) * per_value_ms, mW = 4 * T * C * per_value_ms;
  const double bF = (lin + att) / flops_per_ms + mF, bW = lin / flops_per_ms + mW,
               bI = (lin + 2 * att) / flops_per_ms + mI;
  // The head: the LM head's 2TCV each way; the final LayerNorm and the cross-entropy (logits in,
  // probabilities and the per-token loss out: 2VT + T; backward probabilities in, logit gradients
  // out: 2VT) at the bandwidth.
  const double head = 2 * T * C * V / flops_per_ms;
  const double hF = head + (2 * T * C + 2 * T + 2 * V * T + T) * per_value_ms,
               hI = head + (3 * T * C + 2 * T + 2 * V * T) * per_value_ms, hW = head + 2 * T * C * per_value_ms;
  SizeCosts sc;
  sc.samples = 1;
  sc.parts.resize(static_cast<std::size_t>(L + 2));
  for (int l = 1; l <= L; ++l) {
    auto& b = sc.parts[static_cast<std::size_t>(l)];
    // none keeps every forward value (16 TC floats and the H T^2 probabilities); attention all but
    // the probabilities and their output; block only the block's input. I's work until W: the
    // linears' output gradients (9TC), and what recompute remade (attention: the two products and
    // the softmax again; block: the whole forward).
    b[0] = {bF, bI, bW, f * (16 * T * C + H * T * T), f * 9 * T * C, 0};
    b[1] = {bF, bI + att / flops_per_ms + softmax_F * per_value_ms, bW, f * 15 * T * C, f * (10 * T * C + H * T * T),
            0};
    b[2] = {bF, bI + bF, bW, f * T * C, f * (24 * T * C + H * T * T), 0};
  }
  auto& h = sc.parts.back();
  h[0] = h[1] = {hF, hI, hW, f * (2 * T * C + V * T), f * V * T, 0};
  h[2] = {hF, hI + hF, hW, f * T * C, f * (V * T + 2 * T * C), 0};
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
      (G < dp ? n_run.batch_below_dp : n_run.uneven_dp).push_back(dp);
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
        for (int v : chunk_counts(L / p)) {
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
                const RankShares shares = rank_shares(cl, layout, s.stage_to_rank, elements, p, dp, det,
                                                      allreduce_bytes_per_element(det, opt.exact_bytes));
                const std::vector<double>& ar = shares.ar;
                if (opt.memory_cap > 0 && shares.worst_state > opt.memory_cap) {
                  ++n_run.over_cap;
                  continue;
                }
                ++n_run.configurations;
                const std::vector<double> fixed = rank_fixed_ms(costs, layout, s.stage_to_rank, p);
                const double fixed_ms = *std::max_element(fixed.begin(), fixed.end());
                const double loss_ms = loss_agreement_ms(cl, p, dp, G);
                // Lower bound: the busiest rank's compute, then the all-reduce and the fixed cost.
                const bool overlap = opt.timing == AllReduceTiming::overlapped;
                const double lower = busiest_rank_ms(cm, s, p, S, m) +
                                     (overlap ? 0.0 : *std::max_element(ar.begin(), ar.end())) + loss_ms + fixed_ms;
                if (opt.prune && lower / G >= bound()) continue;
                const Evaluated e =
                    evaluate(s, cm, kinds, cl, boundary_bytes, shares, fixed_ms, loss_ms, opt.timing, opt.memory_cap,
                             false, opt.prune ? bound() * G : std::numeric_limits<double>::infinity());
                // The full simulation that places the overlap where a rank holds several stages counts too.
                sims += static_cast<long long>(kinds.size()) *
                        ((cm.jitter_cv > 0 ? kJitterSamples + 1 : 1) + (overlap && S != p && dp > 1 && !e.pruned));
                if (e.pruned) continue;
                if (!e.fits) {
                  ++n_run.over_cap;
                  continue;
                }
                ScalePoint pt = point_of(e, name, p, dp, s.v, m, r, is_auto, split, G, order);
                // Exposed communication: what the step loses to transfers and all-reduces.
                const Evaluated bare =
                    evaluate(s, cm, kinds, cl, boundary_bytes, shares, fixed_ms, 0.0, opt.timing, 0, true);
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
  const sched::VariantSpec* spec = sched::find_variant_spec(name);
  return spec && spec->build == sched::Build::list_scheduled;
}

std::string list_scheduled_names() {
  std::vector<std::string> names;
  for (const auto& spec : sched::variant_table())
    if (spec.build == sched::Build::list_scheduled) names.emplace_back(spec.name);
  std::string out;
  for (std::size_t k = 0; k < names.size(); ++k)
    out += (k == 0 ? "" : k + 1 == names.size() ? " and " : ", ") + names[k];
  return out;
}

std::string no_configuration_reason(const SweepCount& count, int global_batch, const std::string& batch_key) {
  std::string why;
  if (!count.batch_below_dp.empty()) {
    // The cause that no memory cap or schedule can fix: each replica needs one sample at least.
    const int least = *std::min_element(count.batch_below_dp.begin(), count.batch_below_dp.end());
    std::string dps;
    for (int dp : count.batch_below_dp) dps += (dps.empty() ? "" : ", ") + std::to_string(dp);
    why = "key '" + batch_key + "' has value " + std::to_string(global_batch) +
          ", smaller than the data-parallel degree dp = devices / p of every layout" +
          (count.uneven_dp.empty() ? "" : " but those it does not divide") + " (dp = " + dps +
          "; p <= n_layer and p divides the devices); allowed: a global batch of at least " + std::to_string(least) +
          " that one dp divides, or fewer devices";
  }
  if (!count.uneven_dp.empty()) {
    if (!why.empty()) why += "; ";
    std::string dps;
    for (int dp : count.uneven_dp) dps += (dps.empty() ? "" : ", ") + std::to_string(dp);
    why += "the global batch " + std::to_string(global_batch) + " does not split evenly over dp = " + dps +
           " replicas (devices / p); use a global batch that is a multiple of one of them";
  }
  if (count.over_cap > 0)
    why += std::string(why.empty() ? "" : "; ") + std::to_string(count.over_cap) +
           " configuration(s) over the memory cap: raise --memory-cap or the devices";
  if (why.empty()) why = "no schedule of --schedules has an instance at these p, v and m (p*v <= n_layer)";
  return why;
}

}  // namespace minipipe
