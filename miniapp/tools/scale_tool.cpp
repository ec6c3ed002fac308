// The scaling model: costs (measured, or from FLOPs and bytes), placement of p x dp ranks on a
// cluster's nodes, each boundary charged to the link it crosses, the gradient all-reduce after the
// pipeline as the trainer runs it, a pruned sweep, and the strong/weak curves as hand-written SVG.
#include "miniapp/tools/scale_tool.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "miniapp/io/message_text.hpp"
#include "miniapp/io/output_file.hpp"
#include "miniapp/io/output_paths.hpp"
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

// Elements of each part: embedding, blocks 0..L-1, head.
std::vector<double> part_elements(const ModelShape& s) {
  std::vector<double> out{static_cast<double>(numel(embedding_params(s)))};
  for (int l = 0; l < s.n_layer; ++l) out.push_back(static_cast<double>(numel(block_params(s, l))));
  out.push_back(static_cast<double>(numel(head_params(s))));
  return out;
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
// Default bound of the list-scheduled variants in a sweep (ScaleOptions::list_scheduled_max_pm).
constexpr long long kListScheduledMaxPm = 1024;

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
  const sched::VariantSpec* spec = sched::find_variant_spec(name);
  return spec && spec->build == sched::Build::list_scheduled;
}

// "v-half, v-min and zb-mem": the list-scheduled rows of schedules/variant_table.cpp.
std::string list_scheduled_names() {
  std::vector<std::string> names;
  for (const auto& spec : sched::variant_table())
    if (spec.build == sched::Build::list_scheduled) names.emplace_back(spec.name);
  std::string out;
  for (std::size_t k = 0; k < names.size(); ++k)
    out += (k == 0 ? "" : k + 1 == names.size() ? " and " : ", ") + names[k];
  return out;
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

namespace {

std::string layout_text(const ScalePoint& x) {
  char t[200];
  std::snprintf(t, sizeof(t), "%dx%d %s %s v=%d m=%d %s %s", x.p, x.dp, to_string(x.order), x.schedule.c_str(), x.v,
                x.m, x.auto_split ? "auto" : "even", to_string(x.recompute));
  return t;
}

std::string num(double x, int digits) {
  char t[64];
  std::snprintf(t, sizeof(t), "%.*f", digits, x);
  return t;
}

// Text for an SVG text node: a cluster's name may hold '&' or '<'.
std::string xml_text(const std::string& t) {
  std::string o;
  for (char ch : t) o += ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : std::string(1, ch);
  return o;
}

struct Series {
  std::string name, colour;
  std::vector<std::pair<double, double>> points;  // (devices, value)
  bool dashed = false;
};

// A log-log line chart: x = devices (powers of two), y = samples/s; one polyline per series, a
// marker per point, grid lines at each power of two (x) and decade (y), a legend.
void write_curves_svg(const std::string& title, const std::string& y_label, const std::vector<Series>& series,
                      std::ostream& out) {
  double x0 = 1e300, x1 = 0, y0 = 1e300, y1 = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (y > 0) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (x1 <= 0) x0 = 1, x1 = 2, y0 = 1, y1 = 10;
  const double lx0 = std::floor(std::log2(x0)), lx1 = std::max(lx0 + 1, std::ceil(std::log2(x1)));
  const double ly0 = std::floor(std::log10(y0)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(y1)));
  const double W = 720, Hh = 460, left = 80, right = 200, top = 40, bottom = 50;
  const double pw = W - left - right, ph = Hh - top - bottom;
  auto X = [&](double x) { return left + pw * (std::log2(x) - lx0) / (lx1 - lx0); };
  auto Y = [&](double y) { return top + ph * (1 - (std::log10(y) - ly0) / (ly1 - ly0)); };
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << Hh
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << left << "\" y=\"22\" font-size=\"13\">" << xml_text(title) << "</text>\n";
  for (double e = lx0; e <= lx1; ++e) {
    const double x = X(std::pow(2.0, e));
    out << "<line x1=\"" << num(x, 1) << "\" y1=\"" << top << "\" x2=\"" << num(x, 1) << "\" y2=\"" << top + ph
        << "\" stroke=\"#ddd\"/>\n<text x=\"" << num(x, 1) << "\" y=\"" << top + ph + 16 << "\" text-anchor=\"middle\">"
        << num(std::pow(2.0, e), 0) << "</text>\n";
  }
  for (double e = ly0; e <= ly1; ++e) {
    const double y = Y(std::pow(10.0, e));
    out << "<line x1=\"" << left << "\" y1=\"" << num(y, 1) << "\" x2=\"" << left + pw << "\" y2=\"" << num(y, 1)
        << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 6 << "\" y=\"" << num(y + 4, 1) << "\" text-anchor=\"end\">1e"
        << num(e, 0) << "</text>\n";
  }
  out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"black\"/>\n";
  out << "<text x=\"" << left + pw / 2 << "\" y=\"" << Hh - 10 << "\" text-anchor=\"middle\">devices</text>\n";
  out << "<text transform=\"translate(18," << top + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << y_label
      << "</text>\n";
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    std::string pts;
    for (const auto& [x, y] : s.points)
      if (y > 0) pts += num(X(x), 1) + "," + num(Y(y), 1) + " ";
    out << "<polyline fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"" << pts << "\"/>\n";
    for (const auto& [x, y] : s.points)
      if (y > 0 && !s.dashed)
        out << "<circle cx=\"" << num(X(x), 1) << "\" cy=\"" << num(Y(y), 1) << "\" r=\"3\" fill=\"" << s.colour
            << "\"/>\n";
    const double ly = top + 14 + 18 * static_cast<double>(k);
    out << "<line x1=\"" << left + pw + 12 << "\" y1=\"" << ly << "\" x2=\"" << left + pw + 36 << "\" y2=\"" << ly
        << "\" stroke=\"" << s.colour << "\" stroke-width=\"2\"" << (s.dashed ? " stroke-dasharray=\"6,4\"" : "")
        << "/>\n<text x=\"" << left + pw + 42 << "\" y=\"" << ly + 4 << "\">" << s.name << "</text>\n";
  }
  out << "</svg>\n";
}

// ScaleTool::run's inputs: the deck with the command line's overrides, the cluster, the costs
// (measured or from FLOPs) and the sweep's options; throws on bad input.
void read_scale_inputs(ScaleTool& tool, const std::map<std::string, std::string>& overrides, Cluster& cl,
                       CostFile& costs, ScaleOptions& opt) {
  Deck deck;
  io::check_input_file("--deck", tool.deck_path);
  io::check_input_file("--cluster", tool.cluster_path);
  if (!tool.costs_path.empty()) io::check_input_file("--costs", tool.costs_path);
  io::check_outputs(
      {{"--strong-svg", tool.strong_svg, tool.force, false}, {"--weak-svg", tool.weak_svg, tool.force, false}},
      {{"--deck", tool.deck_path}, {"--cluster", tool.cluster_path}, {"--costs", tool.costs_path}});
  deck = Deck::from_file(tool.deck_path);
  for (const auto& [key, value] : overrides) deck.set_from_text(key, value);
  deck.validate();
  const ModelShape shape = model_shape_from_deck(deck);
  cl = read_cluster(tool.cluster_path);
  if (tool.devices == 0) tool.devices = cl.devices();
  if (tool.devices > cl.devices())
    throw InputError("command line: key '--devices' has value " + std::to_string(tool.devices) + "; allowed: 1 .. " +
                     std::to_string(cl.devices()) + " (the devices of " + tool.cluster_path + ")");
  const bool det = deck.get_string("train.mode") != "fast";
  const int batch = static_cast<int>(deck.get_int("train.batch"));
  if (!tool.costs_path.empty()) {
    costs = read_cost_file(tool.costs_path);
    costs.check_shape(shape, tool.costs_path);
    if (costs.mode != deck.get_string("train.mode"))
      throw InputError("deck: key 'train.mode' has value \"" + deck.get_string("train.mode") + "\" but the cost file " +
                       tool.costs_path + " was measured in \"" + costs.mode + "\"; allowed: the profiled mode");
    cl.use_measured_link(costs.latency_ms, costs.ms_per_byte);
  } else {
    for (const auto& [key, on] : {std::pair<const char*, bool>{"link.intra.from_costs", cl.intra_from_costs},
                                  {"link.inter.from_costs", cl.inter_from_costs}})
      if (on)
        throw InputError("cluster file " + tool.cluster_path + ": key '" + key +
                         "' has value true; allowed: true only with --costs FILE (the measured link)");
    costs = analytic_costs(shape, batch, det, cl);
  }
  opt.global_batch = tool.global_batch > 0 ? tool.global_batch : batch;
  opt.memory_cap = tool.memory_cap_gib > 0 ? tool.memory_cap_gib * 1073741824.0 : cl.memory_bytes;
  opt.overlap_allreduce = tool.overlap_allreduce;
  opt.max_m = tool.max_m;
  opt.prune = !tool.no_prune;
  // scale sweeps the one-copy schedules only (its per-rank state and bounds count one model copy).
  std::vector<std::string> swept;
  for (const auto& a : sched::schedule_names())
    if (sched::model_copies(a) == 1) swept.push_back(a);
  std::stringstream ss(tool.schedules);
  for (std::string n; std::getline(ss, n, ',');) {
    if (std::find(swept.begin(), swept.end(), n) == swept.end()) {
      std::string t;
      for (const auto& a : swept) t += (t.empty() ? "" : " | ") + a;
      const bool two_copies = [&] {
        try {
          return sched::model_copies(n) != 1;
        } catch (const std::exception&) {
          return false;
        }
      }();
      throw InputError("command line: --schedules has entry " + quoted_text(n) +
                       (two_copies ? " (two model copies: scale does not sweep it; `minipipe tune` predicts it)" : "") +
                       "; allowed: a comma list of " + t);
    }
    opt.schedules.push_back(n);
  }
  // Bounded by default (a clear line says what was left out); named explicitly, tried everywhere.
  bool named = false;
  for (const auto& n : opt.schedules) named = named || list_scheduled(n);
  opt.list_scheduled_max_pm = named ? 0 : kListScheduledMaxPm;
  if (tool.batch_per_replica == 0) tool.batch_per_replica = batch;
}

// The model, the cluster and the links the sweep charges.
void print_scale_header(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, std::ostream& out) {
  const ModelShape& s = costs.shape;
  double params = 0;
  for (double e : part_elements(s)) params += e;
  char line[400];
  std::snprintf(line, sizeof(line),
                "scale: %s (V %d, T %d, C %d, H %d, L %d: %.1fM parameters), %s mode; cluster %s: %d node(s) x %d "
                "device(s); costs %s\n",
                tool.deck_path.c_str(), s.vocab, s.seq_len, s.channels, s.n_head, s.n_layer, params / 1e6,
                costs.mode.c_str(), cl.name.c_str(), cl.nodes, cl.devices_per_node,
                tool.costs_path.empty() ? "from FLOPs (device.tflops)" : tool.costs_path.c_str());
  out << line;
  std::snprintf(line, sizeof(line),
                "links: inside a node %.4f ms + bytes / %.3g GB/s, between nodes %.4f ms + bytes / %.3g GB/s; "
                "all-reduce %s (%s), %s the pipeline\n",
                cl.intra.latency_ms, cl.intra.gb_per_s(), cl.inter.latency_ms, cl.inter.gb_per_s(),
                to_string(cl.allreduce),
                costs.mode == "fast" ? "4 B per parameter" : "32 B per parameter: 4 int64 limbs",
                tool.overlap_allreduce ? "overlapped with the end of" : "after (as the trainer runs it)");
  out << line;
}

// The sweep on tool.devices and the table of its best configurations.
void print_best_table(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, const ScaleOptions& opt,
                      std::ostream& out) {
  char line[400];
  const std::clock_t t0 = std::clock();
  SweepCount count;
  const std::vector<ScalePoint> best = best_layouts(costs, cl, tool.devices, opt, tool.top, &count);
  const double cpu = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  out << tool.devices << " devices, global batch " << opt.global_batch << ", memory cap "
      << num(opt.memory_cap / 1073741824.0, 1) << " GiB: " << count.configurations << " configurations, "
      << count.simulations << " pipeline simulations, " << num(cpu, 2) << " s of CPU\n";
  std::snprintf(line, sizeof(line), "%3s  %-44s %10s %10s %7s %9s %9s %9s %11s", "#",
                "p x dp order schedule v m split recompute", "step ms", "makespan", "bubble", "exp comm", "allreduce",
                "mem GiB", "samples/s");
  out << line << "\n";
  for (std::size_t k = 0; k < best.size(); ++k) {
    const ScalePoint& x = best[k];
    std::snprintf(line, sizeof(line), "%3zu  %-44s %10.2f %10.2f %7.3f %9.2f %9.2f %9.2f %11.1f", k + 1,
                  layout_text(x).c_str(), x.step_ms, x.makespan_ms, x.bubble, x.exposed_comm_ms, x.allreduce_ms,
                  x.memory_bytes / 1073741824.0, x.samples_per_s);
    out << line << "\n";
  }
  if (count.list_scheduled_skipped > 0)
    out << "(" << list_scheduled_names() << " were left out of " << count.list_scheduled_skipped
        << " (schedule, p, m, v) instances with p x m > " << opt.list_scheduled_max_pm
        << ": they are list-scheduled over all ranks, seconds per instance at that size; name them in --schedules "
           "to try them everywhere)\n";
  if (best.empty()) out << "(no configuration: " << no_configuration_reason(count, opt.global_batch) << ")\n";
  out << "(step = slowest replica's makespan + all-reduce + loss agreement + fixed update cost; exp comm: what "
         "transfers and all-reduces add to the step; mem: model state + peak stored activations of the fullest "
         "device)\n";
}

// One scaling curve over device counts: strong at opt's global batch, or weak at
// tool.batch_per_replica; prints its table and returns its SVG's text (written by the caller).
std::string scaling_curve(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, const ScaleOptions& opt,
                          const std::vector<int>& counts, bool weak, std::ostream& out) {
  char line[400];
  ScaleOptions o = opt;
  if (weak) o.batch_per_replica = tool.batch_per_replica;
  Series got{"predicted", "#1f77b4", {}, false}, ideal{"ideal (linear)", "#888", {}, true};
  double first = 0;
  int first_n = 0;
  out << (weak ? "weak scaling, batch per replica " + std::to_string(tool.batch_per_replica)
               : "strong scaling, global batch " + std::to_string(opt.global_batch))
      << ":\n";
  for (int n : counts) {
    SweepCount count;
    const auto b = best_layouts(costs, cl, n, o, 1, &count);
    if (b.empty()) {
      out << "  " << n << " devices: no configuration ("
          << (weak ? (count.over_cap > 0 ? "over the memory cap: raise --memory-cap"
                                         : std::string("no schedule instance at these p, v and m"))
                   : no_configuration_reason(count, o.global_batch))
          << ")\n";
      continue;
    }
    const ScalePoint& x = b.front();
    if (first_n == 0) first = x.samples_per_s, first_n = n;
    const double eff = x.samples_per_s / (first * n / first_n);
    std::snprintf(line, sizeof(line),
                  "  %6d devices: %-44s step %10.2f ms  bubble %.3f  exp comm %8.2f ms  %10.1f samples/s  "
                  "efficiency %.2f",
                  n, layout_text(x).c_str(), x.step_ms, x.bubble, x.exposed_comm_ms, x.samples_per_s, eff);
    out << line << "\n";
    got.points.push_back({static_cast<double>(n), x.samples_per_s});
    ideal.points.push_back({static_cast<double>(n), first * n / first_n});
  }
  const std::string title = std::string(weak ? "Weak" : "Strong") + " scaling: " + tool.deck_path + " on " + cl.name;
  std::ostringstream svg;
  write_curves_svg(title, "samples/s", {got, ideal}, svg);
  return svg.str();
}

// The SVGs all or nothing: every temporary is written whole before any is renamed, a failure
// removes every temporary, and a rename that fails after another succeeded removes the file
// that one made (a rerun must not find half of the outputs and refuse without --force).
void write_all_or_nothing(const std::vector<std::pair<std::string, std::string>>& files, bool force,
                          std::ostream& out) {
  std::vector<std::unique_ptr<io::OutputFile>> temps;
  for (const auto& [path, text] : files) {
    temps.push_back(std::make_unique<io::OutputFile>(path, force));
    temps.back()->write(text.data(), text.size());
  }
  std::vector<std::string> done;
  try {
    for (auto& t : temps) {
      t->commit();
      done.push_back(t->target());
    }
  } catch (...) {
    if (!force)
      for (const auto& d : done) std::remove(d.c_str());
    throw;
  }
  for (const auto& d : done) out << "wrote " << d << "\n";
}

}  // namespace

void ScaleTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("scale",
                              "predict the best p x dp x schedule x m x v x recompute on N devices of a cluster file "
                              "(links per boundary, the gradient all-reduce), and strong/weak scaling curves");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--deck", deck_path, "TOML input deck (the model shape, train.batch, train.mode)")->required();
  sub->add_option("--cluster", cluster_path, "cluster file (TOML, docs/cluster.md)")->required();
  sub->add_option("--devices", devices, "devices to plan for (0 = all of the cluster)")->check(CLI::Range(0, 1 << 24));
  sub->add_option("--costs", costs_path,
                  "cost file of `minipipe profile` on this deck (times divided by device.speedup); empty: costs "
                  "from FLOPs at device.tflops");
  sub->add_option("--global-batch", global_batch, "strong scaling's global batch (0 = the deck's train.batch)")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--batch-per-replica", batch_per_replica,
                  "weak scaling's batch per replica (0 = the deck's train.batch)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--memory-cap", memory_cap_gib, "GiB per device for model state and activations (0 = the cluster's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-m", max_m, "largest m tried")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--top", top, "configurations printed")->check(CLI::Range(1, 100000));
  sub->add_option("--schedules", schedules, "comma list of schedules to try (empty = all)");
  sub->add_flag("--overlap-allreduce", overlap_allreduce,
                "model each rank's all-reduce starting at its last action (the runtime starts it after the "
                "pipeline; this shows what overlapping would gain)");
  sub->add_flag("--no-prune", no_prune,
                "simulate every configuration, also those whose lower bound cannot enter the best (to measure)");
  sub->add_option("--strong-svg", strong_svg, "SVG of samples/s over device counts at the fixed global batch");
  sub->add_option("--weak-svg", weak_svg, "SVG of samples/s over device counts at the fixed batch per replica");
  sub->add_flag("--force", force, "overwrite existing SVG files");
}

int ScaleTool::run(const std::map<std::string, std::string>& overrides, std::ostream& out, std::ostream& err) {
  Cluster cl;
  CostFile costs;
  ScaleOptions opt;
  try {
    read_scale_inputs(*this, overrides, cl, costs, opt);
  } catch (const std::exception& e) {
    err << "minipipe: error: " << e.what() << "\n";
    return 2;
  }
  // Inputs are checked: what fails from here on is a failure of the command (exit 3), never an
  // uncaught exception.
  try {
    print_scale_header(*this, cl, costs, out);
    print_best_table(*this, cl, costs, opt, out);
    if (strong_svg.empty() && weak_svg.empty()) return 0;
    std::vector<int> counts;
    for (int n = 1; n < devices; n *= 2) counts.push_back(n);
    counts.push_back(devices);
    std::vector<std::pair<std::string, std::string>> files;
    if (!strong_svg.empty()) files.push_back({strong_svg, scaling_curve(*this, cl, costs, opt, counts, false, out)});
    if (!weak_svg.empty()) files.push_back({weak_svg, scaling_curve(*this, cl, costs, opt, counts, true, out)});
    write_all_or_nothing(files, force, out);
  } catch (const std::exception& e) {
    out << std::flush;
    err << "minipipe: error: scale: " << e.what() << "\n";
    return 3;
  }
  return 0;
}

}  // namespace minipipe
