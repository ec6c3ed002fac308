// Profiling: every part (embedding, each block, head) becomes a one-part stage so that its F, I
// and W are timed alone, with fences, on this machine's backend; transfers by MPI ping-pong.
#include "miniapp/runtime/profile.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>

#include "miniapp/model/data.hpp"
#include "miniapp/runtime/comm.hpp"
#include "miniapp/runtime/real.hpp"
#include "miniapp/runtime/stage.hpp"

namespace minipipe {

namespace {

// The median of the repetitions.
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The least of the repetitions: on a shared machine every disturbance only adds time.
double least(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

// One-way time (ms) of `bytes` between ranks 0 and 1: the least round trip / 2.
double ping_pong(MPI_Comm comm, int rank, std::size_t bytes, CommPath path) {
  const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(Real));
  View2<Real> dev(Kokkos::view_alloc("Profile::ping", Kokkos::WithoutInitializing), n, 1);
  auto host = Kokkos::create_mirror(dev);
  Real* buf = path == CommPath::host_staging ? host.data() : dev.data();
  const int peer = 1 - rank, count = static_cast<int>(n);
  std::vector<double> t;
  for (int k = 0; k < 12; ++k) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    for (int dir = 0; dir < 2; ++dir) {
      if (rank == dir) {
        if (path == CommPath::host_staging) Kokkos::deep_copy(host, dev);
        MPI_Send(buf, count, mpi_type<Real>(), peer, 7, comm);
      } else {
        MPI_Recv(buf, count, mpi_type<Real>(), peer, 7, comm, MPI_STATUS_IGNORE);
        if (path == CommPath::host_staging) Kokkos::deep_copy(dev, host);
      }
    }
    if (k >= 2) t.push_back(1e3 * (MPI_Wtime() - t0) / 2);
  }
  return least(t);
}

// Every part of the model, as its own one-part stage, for each micro-batch size n in `samples`
// under each recompute mode: per mode, a warm-up round and `rounds` timed rounds, each running one
// step of every size in turn. A step of size n runs m = batch.B / n micro-batches as the trainer
// does: begin_step(m) (a step of several shares each weight's packed copies; a part is a pipeline
// stage, so a deterministic one holds none of its dW samples back), then F, I and W of each
// micro-batch in turn (one stored at a time). Sizes alternate within a round, so a change in the
// machine's load hits them alike (timed one size after another, a slow spell made one size look
// 20% dearer and the calibration carried that to every other). A step's F and I of a part are its
// means over the m micro-batches, so the packing the first pays is spread as in a real run; W
// likewise, unless samples were still held before the step's last W: then W is the mean of the
// others and W_tail what the last costs more (the simulator adds it to a stage's last W). Medians
// over rounds are kept (W_tail's clamped at 0 after the median). A mode's buffers are freed before the next, so
// at most one mode's sets for every size are alive. `fixed` receives each part's median per-step
// fixed cost (zeroing, finalize, optimizer update), measured on the largest size without
// recompute. Result: [size][mode][part].
// Wall time (ms) of `fn`, the execution space fenced after it.
template <class Fn>
double timed(Fn&& fn) {
  const double t0 = MPI_Wtime();
  fn();
  fence_space(ExecSpace(), "Profile::fence");
  return 1e3 * (MPI_Wtime() - t0);
}

// What one step of one size took per part (ms): zeroing and begin_step, the sums of F and I over
// its micro-batches, of W over all but the last, the last W, and whether samples were still held
// before that last W.
struct StepSums {
  std::vector<double> zero_ms, f, i, w, w_last;
  std::vector<char> held;
};

// Every part of the model as its own one-part stage (stage 0 the embedding, 1..L the blocks,
// L+1 the head), with boundary buffers between them for micro-batches of up to n_max samples.
struct PartBench {
  PartBench(const ModelShape& shape_in, Mode mode, std::uint64_t seed, const Batch& batch, int n_max)
      : shape(shape_in), S(shape_in.n_layer + 2), in(device_inputs<Real>(batch)) {
    const int L = shape.n_layer;
    StageLayout layout;
    for (int s = 0; s < S; ++s) {
      layout.first.push_back(s == 0 ? 0 : std::min(s - 1, L));
      layout.count.push_back(s >= 1 && s <= L ? 1 : 0);
    }
    for (int s = 0; s < S; ++s) stages.emplace_back(shape, layout, s, mode, seed);
    const std::size_t N_max = static_cast<std::size_t>(n_max) * shape.seq_len;
    act.resize(S), grad.resize(S);
    for (int s = 0; s < S; ++s) {
      act[s] = View2<Real>("Profile::act", N_max, shape.channels);
      grad[s] = View2<Real>("Profile::grad", N_max, shape.channels);
    }
  }

  // One step of m micro-batches of n samples as the trainer runs it: zeroing and begin_step(m),
  // then F, I and W of each micro-batch in turn (one stored at a time). `parts` receives the
  // bytes each part keeps after F and adds in I.
  StepSums step(int n, int m, std::vector<PartCost>& parts) {
    StepSums t{std::vector<double>(S),      std::vector<double>(S, 0.0), std::vector<double>(S, 0.0),
               std::vector<double>(S, 0.0), std::vector<double>(S, 0.0), std::vector<char>(S)};
    const std::size_t N = static_cast<std::size_t>(n) * shape.seq_len;
    for (int s = 0; s < S; ++s)
      t.zero_ms[s] = timed([&] {
        stages[s].zero_grads();
        stages[s].begin_step(m);
      });
    for (int k = 0; k < m; ++k) {
      const MicroBatch mb{k, k * n, n};
      for (int s = 0; s < S; ++s) {
        t.f[s] += timed([&] {
          stages[s].forward(mb, in, s > 0 ? CMat<Real>(act[s - 1].data(), N, shape.channels) : CMat<Real>(),
                            s < S - 1 ? Mat<Real>(act[s].data(), N, shape.channels) : Mat<Real>());
        });
        parts[s].kept_bytes = static_cast<double>(stages[s].stored_bytes());
      }
      for (int s = S - 1; s >= 0; --s) {
        t.i[s] += timed([&] {
          stages[s].backward_input(mb, in, s < S - 1 ? CMat<Real>(grad[s + 1].data(), N, shape.channels) : CMat<Real>(),
                                   s > 0 ? Mat<Real>(grad[s].data(), N, shape.channels) : Mat<Real>());
        });
        parts[s].work_bytes = static_cast<double>(stages[s].stored_bytes()) - parts[s].kept_bytes;
      }
      for (int s = S - 1; s >= 0; --s) {
        const double tw = timed([&] { stages[s].backward_weight(mb, in); });
        (k == m - 1 ? t.w_last[s] : t.w[s]) += tw;
        if (k == m - 1) t.held[s] = m > 1 && stages[s].last_w_added_held();
      }
    }
    return t;
  }

  // The trainer's work once per step beyond the zeroing: finalize and the update (ms per part).
  double finish(int s, const OptimizerConfig& opt, int step) {
    return timed([&] { stages[s].finalize_grads(); }) + timed([&] { stages[s].optimizer_step(opt, step); });
  }

  ModelShape shape;
  int S;
  std::vector<Stage<Real>> stages;
  StepInputs<Real> in;
  std::vector<View2<Real>> act, grad;
};

// Every part of the model, as its own one-part stage, for each micro-batch size n in `samples`
// under each recompute mode: per mode, a warm-up round and `rounds` timed rounds, each running one
// step of every size in turn (PartBench::step). A step of several micro-batches shares each
// weight's packed copies (a part is a pipeline stage: no dW samples held back, Stage::begin_step).
// Sizes alternate within a round, so a change in the machine's load hits them
// alike (timed one size after another, a slow spell made one size look 20% dearer and the
// calibration carried that to every other). A step's F and I of a part are its means over the m
// micro-batches, so the packing the first pays is spread as in a real run; W likewise, unless
// samples were still held before the step's last W: then W is the mean of the others and W_tail
// what the last costs more (the simulator adds it to a stage's last W). Medians over rounds are
// kept (W_tail's clamped at 0 after the median). A mode's buffers are freed before the next, so
// at most one mode's sets for every size are alive. `fixed` receives each part's median per-step
// fixed cost (zeroing, finalize, optimizer update), measured on the largest size without
// recompute. Result: [size][mode][part].
std::vector<std::array<std::vector<PartCost>, 3>> profile_parts(const ModelShape& shape, Mode mode, std::uint64_t seed,
                                                                const Batch& batch, const std::vector<int>& samples,
                                                                int rounds, const OptimizerConfig& opt,
                                                                std::vector<double>& fixed) {
  const int n_max = *std::max_element(samples.begin(), samples.end());
  PartBench bench(shape, mode, seed, batch, n_max);
  const int S = bench.S;
  // Per size, mode and part: one entry per timed round.
  struct Times {
    std::vector<double> F, I, W, W_tail;
  };
  const std::size_t n_sizes = samples.size();
  std::vector<std::array<std::vector<Times>, 3>> t(n_sizes);
  for (auto& by_mode : t)
    for (auto& parts : by_mode) parts.resize(static_cast<std::size_t>(S));
  std::vector<std::array<std::vector<PartCost>, 3>> out(n_sizes);
  for (auto& by_mode : out)
    for (auto& parts : by_mode) parts.resize(static_cast<std::size_t>(S));
  std::vector<std::vector<double>> z(S);

  for (int ri = 0; ri < 3; ++ri) {
    const auto r = static_cast<Recompute>(ri);
    for (auto& st : bench.stages) st.release_buffers(), st.set_recompute(r);
    for (int round = 0; round <= rounds; ++round) {  // round 0 warms up (allocations, first touches)
      for (std::size_t j = 0; j < n_sizes; ++j) {
        const int n = samples[j], m = batch.B / n;
        const StepSums sum = bench.step(n, m, out[j][static_cast<std::size_t>(ri)]);
        // The trainer's work once per step: zeroing (timed in the step), finalize and the update.
        const bool with_fixed = n == n_max && r == Recompute::none;
        std::vector<double> fixed_ms(S, 0.0);
        if (with_fixed)
          for (int s = 0; s < S; ++s) fixed_ms[s] = sum.zero_ms[s] + bench.finish(s, opt, round + 1);
        if (round == 0) continue;
        for (int s = 0; s < S; ++s) {
          Times& x = t[j][static_cast<std::size_t>(ri)][static_cast<std::size_t>(s)];
          x.F.push_back(sum.f[s] / m), x.I.push_back(sum.i[s] / m);
          // Signed: where the last W adds little, its noise must not average into a positive tail.
          const double w_other = sum.held[s] ? sum.w[s] / (m - 1) : (sum.w[s] + sum.w_last[s]) / m;
          x.W.push_back(w_other), x.W_tail.push_back(sum.held[s] ? sum.w_last[s] - w_other : 0.0);
          if (with_fixed) z[s].push_back(fixed_ms[s]);
        }
      }
    }
  }
  for (auto& st : bench.stages) st.release_buffers();
  // The median, not the least: under other work a short part sometimes escapes every disturbance
  // and a long one never does, so least times are not comparable across parts and sizes (and the
  // tuner would favour whichever configuration was measured lucky); the calibration scales the
  // typical times to a real run.
  for (std::size_t j = 0; j < n_sizes; ++j)
    for (std::size_t ri = 0; ri < 3; ++ri)
      for (std::size_t s = 0; s < static_cast<std::size_t>(S); ++s) {
        const Times& x = t[j][ri][s];
        PartCost& pc = out[j][ri][s];
        pc.F = median(x.F), pc.I = median(x.I), pc.W = median(x.W), pc.W_tail = std::max(0.0, median(x.W_tail));
      }
  fixed.assign(static_cast<std::size_t>(S), 0.0);
  for (int s = 0; s < S; ++s) fixed[static_cast<std::size_t>(s)] = median(z[s]);
  return out;
}

}  // namespace

CostFile profile_costs(const Deck& deck, MPI_Comm comm, int repeat, bool concurrent) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  CostFile c;
  c.shape = model_shape_from_deck(deck);
  const RunConfig& cfg = deck.config();
  c.batch = static_cast<int>(cfg.train.batch);
  c.real_bytes = sizeof(Real);
  c.backend = ExecSpace::name();
  c.mode = cfg.train.mode;
  std::string why;
  const CommPath path = choose_comm_path(cfg.pipeline.cuda_aware, why);
  c.comm_path = to_string(path);
  std::vector<int> samples;
  for (int m = c.batch; m >= 1; --m)
    if (c.batch % m == 0) samples.push_back(c.batch / m);

  // Transfers: a least-squares line through (bytes, one-way ms) of every boundary size.
  if (world >= 2) {
    MPI_Comm pair = MPI_COMM_NULL;
    MPI_Comm_split(comm, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    if (pair != MPI_COMM_NULL) {
      std::vector<double> x, y;
      for (int n : samples) {
        const double bytes = static_cast<double>(n) * c.shape.seq_len * c.shape.channels * sizeof(Real);
        x.push_back(bytes), y.push_back(ping_pong(pair, rank, static_cast<std::size_t>(bytes), path));
      }
      x.push_back(sizeof(Real)), y.push_back(ping_pong(pair, rank, sizeof(Real), path));
      double mx = 0, my = 0;
      for (std::size_t k = 0; k < x.size(); ++k) mx += x[k] / x.size(), my += y[k] / y.size();
      double sxy = 0, sxx = 0;
      for (std::size_t k = 0; k < x.size(); ++k) sxy += (x[k] - mx) * (y[k] - my), sxx += (x[k] - mx) * (x[k] - mx);
      c.ms_per_byte = sxx > 0 ? std::max(0.0, sxy / sxx) : 0.0;
      c.latency_ms = std::max(0.0, my - c.ms_per_byte * mx);
      c.transfer_measured = true;
      MPI_Comm_free(&pair);
    }
  }
  // Alone (the default): rank 0 runs every part while the others wait, as most actions of a
  // pipeline run next to an idle or waiting peer at large micro-batches; the calibration measures
  // what running side by side costs. `concurrent`: every rank at once, the least over ranks.
  const Mode mode = c.mode == "fast" ? Mode::fast : Mode::deterministic;
  const auto seed = static_cast<std::uint64_t>(cfg.train.seed);
  const Batch batch = DataSource(deck, c.shape).batch(0, c.batch);
  OptimizerConfig opt;
  opt.kind = cfg.train.optimizer == "sgd" ? OptimizerKind::sgd : OptimizerKind::adamw;
  const std::size_t parts_n = static_cast<std::size_t>(c.shape.n_layer + 2);
  c.step_fixed_ms.assign(parts_n, 0.0);
  c.profiled_ranks = concurrent ? world : 1;
  const bool runs_parts = concurrent || rank == 0;
  const auto measured = runs_parts ? profile_parts(c.shape, mode, seed, batch, samples, repeat, opt, c.step_fixed_ms)
                                   : std::vector<std::array<std::vector<PartCost>, 3>>();
  for (std::size_t j = 0; j < samples.size(); ++j) {
    SizeCosts sc;
    sc.samples = samples[j];
    sc.parts.resize(parts_n);
    if (runs_parts)
      for (std::size_t p = 0; p < parts_n; ++p)
        for (std::size_t r = 0; r < 3; ++r) sc.parts[p][r] = measured[j][r][p];
    c.sizes.push_back(std::move(sc));
  }
  // F, I, W, W_tail and the bytes of every size, part and mode, then the fixed costs: the same
  // on every rank.
  std::vector<double> t;
  for (const auto& sc : c.sizes)
    for (const auto& part : sc.parts)
      for (const auto& pc : part) t.insert(t.end(), {pc.F, pc.I, pc.W, pc.W_tail, pc.kept_bytes, pc.work_bytes});
  t.insert(t.end(), c.step_fixed_ms.begin(), c.step_fixed_ms.end());
  if (concurrent)
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MIN, comm);
  else
    MPI_Bcast(t.data(), static_cast<int>(t.size()), MPI_DOUBLE, 0, comm);
  std::size_t k = 0;
  for (auto& sc : c.sizes)
    for (auto& part : sc.parts)
      for (auto& pc : part) {
        pc.F = t[k++], pc.I = t[k++], pc.W = t[k++], pc.W_tail = t[k++];
        pc.kept_bytes = t[k++], pc.work_bytes = t[k++];
      }
  for (auto& x : c.step_fixed_ms) x = t[k++];
  return c;
}

}  // namespace minipipe
