// Trainer: a step is zero gradients, execute the rank's actions, agree on the loss, finalize
// gradients and update parameters; observers see the gradients and the new parameters.
#include "miniapp/runtime/trainer.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/cross_entropy.hpp"
#include "kernels/finite_check.hpp"
#include "miniapp/mpi/peer_wait.hpp"
#include "util/agree.hpp"

namespace minipipe {

namespace {

// Exact accumulators' elements side by side in batches of at most kBatchLimbs limbs: a batch is
// packed into one buffer and reduced with one fence and one message, so the gradient reductions
// synchronize with the host once per batch, not once per parameter. Integer sums do not depend on
// how the elements are grouped, so the bits are those of a reduction per parameter.
constexpr std::size_t kBatchLimbs = std::size_t(4) << 20;  // 32 MiB of limbs per message

template <class T>
struct LimbPiece {
  GradAccum<T>* acc;
  std::size_t index;       // of acc in the list the batches were cut from
  std::size_t first, len;  // acc's elements [first, first + len)
  std::size_t offset;      // their limbs' start in the batch buffer
  std::size_t limbs() const { return ExactLimbs::kLimbs * len; }
};

template <class T>
std::vector<std::vector<LimbPiece<T>>> limb_batches(const std::vector<GradAccum<T>*>& accs) {
  std::vector<std::vector<LimbPiece<T>>> out;
  std::size_t used = kBatchLimbs;  // the first piece opens a batch
  for (std::size_t k = 0; k < accs.size(); ++k)
    for (std::size_t first = 0; first < accs[k]->size();) {
      if (used == kBatchLimbs) out.emplace_back(), used = 0;
      const std::size_t len = std::min(accs[k]->size() - first, (kBatchLimbs - used) / ExactLimbs::kLimbs);
      out.back().push_back({accs[k], k, first, len, used});
      used += ExactLimbs::kLimbs * len;
      first += len;
    }
  return out;
}

template <class T>
std::size_t batch_limbs(const std::vector<LimbPiece<T>>& batch) {
  return batch.back().offset + batch.back().limbs();
}

LimbView limb_range(const LimbView& v, std::size_t offset, std::size_t n) {
  return Kokkos::subview(v, std::make_pair(offset, offset + n));
}

// x(i) += y(i) for i < n, on the execution space (DualPipe's two copies; a free function because
// CUDA's extended lambdas may not sit in a private member function).
template <class View>
void add_into(const View& x, const View& y, std::size_t n) {
  Kokkos::parallel_for(
      "Trainer::sum_model_copies", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const std::size_t i) { x(i) += y(i); });
}

// Whether `stage`'s last weight-gradient action of the step is a split W (nothing consumes a W's
// output) rather than a B (whose input gradient another stage, or the step's end, waits for).
bool ends_with_split_w(const sched::Schedule& plan, int stage) {
  bool split = false;
  const auto note = [&](const sched::Action& a) {
    if (a.stage == stage && (a.op == sched::Op::W || a.op == sched::Op::B)) split = a.op == sched::Op::W;
  };
  for (const auto& a :
       plan.ranks.at(static_cast<std::size_t>(plan.stage_to_rank.at(static_cast<std::size_t>(stage))))) {
    note(a);
    for (const auto& sub : a.sub) note(sub);
  }
  return split;
}

}  // namespace

std::vector<MicroBatch> split_batch(int B, int m, int first) {
  if (m < 1 || m > B)
    throw std::invalid_argument("split_batch: " + std::to_string(m) + " micro-batches of a batch of " +
                                std::to_string(B) + "; need 1 <= m <= B");
  std::vector<MicroBatch> out;
  int s0 = first;
  for (int i = 0; i < m; ++i) {
    const int n = B / m + (i < B % m ? 1 : 0);
    out.push_back({i, s0, n});
    s0 += n;
  }
  return out;
}

SampleRange replica_share(int B, int dp, int d) {
  if (dp < 1 || d < 0 || d >= dp)
    throw std::invalid_argument("replica_share: replica " + std::to_string(d) + " of " + std::to_string(dp));
  const int base = B / dp, extra = B % dp;
  return {d * base + std::min(d, extra), base + (d < extra ? 1 : 0)};
}

template <class T>
Trainer<T>::Trainer(MPI_Comm job, MPI_Comm pipeline, MPI_Comm replicas, const ModelShape& shape,
                    const StageLayout& layout, const sched::Schedule& plan, Mode mode, std::uint64_t seed,
                    CommPath path, const OptimizerConfig& opt, double timeout_s, Recompute recompute, bool action_fence,
                    const ReduceConfig& reduce)
    : job_(job),
      comm_(pipeline),
      replicas_(replicas),
      timeout_(timeout_s),
      path_(path),
      shape_(shape),
      plan_(plan),
      opt_(opt),
      overlap_(reduce.overlap) {
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(replicas_, &num_replicas_);
  for (int s = 0; s < plan_.num_stages(); ++s)
    if (plan_.stage_to_rank.at(static_cast<std::size_t>(s)) == rank)
      stages_.emplace_back(shape, layout, s, mode, seed, recompute);
  executor_ = std::make_unique<Executor<T>>(comm_, plan_, stages_, path, shape.seq_len, shape.channels, timeout_s,
                                            action_fence);
  // The exact sums are read after the backward by the replicas' all-reduce and by the sum of two
  // model copies (sum_model_copies); else only finalize converts them.
  for (auto& s : stages_) s.set_sums_read(num_replicas_ > 1 || plan_.chains > 1);
  if (num_replicas_ > 1) {
    reducer_ = std::make_unique<GradReducer<T>>(job_, replicas_, path, reduce, timeout_s);
    // Where each local stage's last weight gradient of the step runs (a W or B, also inside an
    // OVERLAP_F_B): its reduction can start right after that entry of the action list.
    std::map<int, std::size_t> last;
    const auto& actions = plan_.ranks.at(static_cast<std::size_t>(rank));
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const auto note = [&](const sched::Action& a) {
        if (a.op == sched::Op::W || a.op == sched::Op::B) last[a.stage] = i;
      };
      note(actions[i]);
      for (const auto& sub : actions[i].sub) note(sub);
    }
    for (std::size_t k = 0; k < stages_.size(); ++k)
      if (auto it = last.find(stages_[k].id()); it != last.end()) last_w_[it->second].push_back(static_cast<int>(k));
    executor_->after_each_action([this](std::size_t i) { after_action(i); });
  }
}

// After entry `index` of the action list: the stages whose last W it was start their reduction
// (overlap on), and the buckets in flight advance.
template <class T>
void Trainer<T>::after_action(std::size_t index) {
  if (overlap_)
    if (auto it = last_w_.find(index); it != last_w_.end())
      for (int k : it->second) reducer_->start(stages_[static_cast<std::size_t>(k)]);
  reducer_->progress();
}

template <class T>
Trainer<T>::~Trainer() = default;

template <class T>
StepResult Trainer<T>::step(int step, const Batch& batch, SampleRange share, StepObserver<T>* observer) {
  const double t0 = MPI_Wtime();
  const std::int64_t syncs0 = host_sync_count();
  const auto mbs = split_batch(share.count, plan_.m, share.first);
  StepResult res;
  res.sample_loss.assign(static_cast<std::size_t>(batch.B), 0.0);
  res.sample_tokens.assign(static_cast<std::size_t>(batch.B), 0);
  upload(step, batch);
  for (auto& s : stages_) {
    s.zero_grads();
    // With two model copies a stage runs only its copy's micro-batches.
    int runs = 0;
    for (int mb = 0; mb < static_cast<int>(mbs.size()); ++mb) runs += plan_.runs(s.id(), mb);
    s.begin_step(runs, ends_with_split_w(plan_, s.id()), share.first, share.count);
  }
  if (reducer_) reducer_->begin_step();
  res.stats = executor_->run(step, mbs, in_, observer);
  const double run_end = MPI_Wtime();
  // The step's clock (that of res.stats) starts at run_end - makespan.
  clock0_ = run_end - res.stats.makespan;
  // What remains of the gradient reduction after the pipeline is exposed (all of it with overlap
  // off), and DualPipe's sum of the two model copies after it.
  {
    const double a0 = MPI_Wtime();
    if (reducer_) {
      ProfileRegion region("Trainer::allreduce");
      reducer_->finish(stages_);
    }
    sum_model_copies();
    res.stats.allreduce = MPI_Wtime() - a0;
    res.stats.allreduce_start = a0 - clock0_;
    if (reducer_) {
      const ReduceStats& r = reducer_->stats();
      res.stats.allreduce_total = r.last_done - r.first_start;
      res.stats.allreduce_bytes = r.bytes, res.stats.allreduce_elements = r.elements;
      res.stats.allreduce_full_pieces = r.full_pieces;
    }
  }
  // The last stage left each sample's loss on the device: one copy per step.
  blocking_copy(Kokkos::View<double*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(res.sample_loss.data(),
                                                                                          res.sample_loss.size()),
                in_.sample_loss);
  blocking_copy(Kokkos::View<int*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(res.sample_tokens.data(),
                                                                                       res.sample_tokens.size()),
                in_.sample_tokens);
  gather_loss(step, res);
  if (!std::isfinite(res.loss))
    note_non_finite(res.stats, "step " + std::to_string(step) + " / loss: " +
                                   (std::isnan(res.loss) ? "NaN" : "inf or out of the exact accumulator's range"));
  const double o0 = MPI_Wtime();
  finalize(step, res.stats);
  agree_finite(step, res.stats);
  update(step, res.stats, observer);
  res.stats.optimizer = MPI_Wtime() - o0;
  agree_finite(step, res.stats);
  res.stats.step = MPI_Wtime() - t0;
  res.stats.host_syncs = host_sync_count() - syncs0;
  return res;
}

// The global batch on the device: every rank holds it (the first stage needs the tokens, the
// last the targets, and both are a few bytes per token).
template <class T>
void Trainer<T>::upload(int step, const Batch& batch) {
  const std::size_t n = batch.tokens.size();
  if (in_.tokens.extent(0) != n) {
    in_.tokens = Kokkos::View<int*, MemSpace>("Trainer::tokens", n);
    in_.targets = Kokkos::View<int*, MemSpace>("Trainer::targets", n);
  }
  const std::size_t B = static_cast<std::size_t>(batch.B);
  if (in_.sample_loss.extent(0) != B) {
    in_.sample_loss = Kokkos::View<double*, MemSpace>("Trainer::sample_loss", B);
    in_.sample_tokens = Kokkos::View<int*, MemSpace>("Trainer::sample_tokens", B);
  }
  // fills on ExecSpace (no host wait); only the last stage's rank writes its samples
  Kokkos::deep_copy(ExecSpace(), in_.sample_loss, 0.0);
  Kokkos::deep_copy(ExecSpace(), in_.sample_tokens, 0);
  using HostInts = Kokkos::View<const int*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  blocking_copy(in_.tokens, HostInts(batch.tokens.data(), n));  // from pageable host memory
  blocking_copy(in_.targets, HostInts(batch.targets.data(), n));
  in_.global_valid_tokens = batch.valid_tokens();
  if (in_.global_valid_tokens <= 0)
    throw InputError("data: step " + std::to_string(step) + " has no valid target token in the global batch");
}

// The last stage's rank holds the per-sample sums; everyone learns them and forms the same
// exact sum, divided by the valid tokens of the whole global batch.
template <class T>
void Trainer<T>::gather_loss(int step, StepResult& res) const {
  const int last_rank = plan_.stage_to_rank.back();
  const int B = static_cast<int>(res.sample_loss.size());
  CollectiveGuard guard(timeout_, "the loss of step " + std::to_string(step) + " from the last stage's rank " +
                                      std::to_string(last_rank) + " (and the other replicas)");
  if (plan_.chains == 1) {
    MPI_Bcast(res.sample_loss.data(), B, MPI_DOUBLE, last_rank, comm_);
    MPI_Bcast(res.sample_tokens.data(), B, MPI_INT, last_rank, comm_);
  } else {
    // Each copy's last stage filled its own micro-batches' samples (zeros elsewhere, x + 0 == x).
    MPI_Allreduce(MPI_IN_PLACE, res.sample_loss.data(), B, MPI_DOUBLE, MPI_SUM, comm_);
    MPI_Allreduce(MPI_IN_PLACE, res.sample_tokens.data(), B, MPI_INT, MPI_SUM, comm_);
  }
  // Each replica filled only its own samples (zeros elsewhere, and x + 0 == x exactly).
  if (num_replicas_ > 1) {
    MPI_Allreduce(MPI_IN_PLACE, res.sample_loss.data(), B, MPI_DOUBLE, MPI_SUM, replicas_);
    MPI_Allreduce(MPI_IN_PLACE, res.sample_tokens.data(), B, MPI_INT, MPI_SUM, replicas_);
  }
  for (double v : res.sample_loss) {
    if (!std::isfinite(v)) {
      res.loss = v;  // the step diverged: agree_finite names where first
      return;
    }
  }
  try {
    res.loss = global_loss(res.sample_loss, res.sample_tokens);
  } catch (const std::runtime_error&) {
    // A finite sum beyond the exact accumulator's range: the step diverged like a non-finite one
    // (every rank holds the same sums, so every rank gets here alike).
    res.loss = std::numeric_limits<double>::infinity();
  }
}

template <class T>
void Trainer<T>::note_non_finite(RankStepStats& st, const std::string& where) const {
  if (!st.non_finite.found) st.non_finite = {true, MPI_Wtime() - clock0_, where};
}

// Gradients of the step into Param::grad; an exact accumulator that overflowed (a partial out
// of range or not finite) or a non-finite float gradient is the step's divergence.
template <class T>
void Trainer<T>::finalize(int step, RankStepStats& st) {
  for (auto& s : stages_) {
    std::vector<NonFinite> bad;
    try {
      bad = s.finalize_grads();
    } catch (const GradientOverflow& e) {
      note_non_finite(
          st, "step " + std::to_string(step) + " / stage " + std::to_string(s.id()) + ": out of range: " + e.what());
      continue;
    }
    for (std::size_t k = 0; k < bad.size(); ++k)
      if (bad[k])
        note_non_finite(
            st, describe_non_finite(bad[k], "step " + std::to_string(step) + " / stage " + std::to_string(s.id()) +
                                                " / " + s.params()[k].spec.name + " gradient"));
  }
}

// Collective over the job: when any rank met a non-finite value, every rank throws the same
// Diverged naming the earliest (on the step's clock) and the rank that saw it.
template <class T>
void Trainer<T>::agree_finite(int step, const RankStepStats& st) const {
  CollectiveGuard guard(timeout_, "every rank's finiteness check of step " + std::to_string(step));
  const util::EarliestText first =
      util::earliest_text(job_, st.non_finite.found, st.non_finite.time, st.non_finite.where);
  if (first.root >= 0)
    throw Diverged(step,
                   "the run diverged: " + first.text + " (seen first on rank " + std::to_string(first.root) + ")");
}

// One MPI_Sendrecv of `count` elements with the rank holding the other model copy of a part,
// through host buffers where MPI cannot read device memory.
template <class T>
void Trainer<T>::exchange(void* send, void* recv, int count, MPI_Datatype type, int peer, int tag) const {
  MPI_Sendrecv(send, count, type, peer, tag, recv, count, type, peer, tag, comm_, MPI_STATUS_IGNORE);
}

// DualPipe: every part of the model lives in two copies (rank j holds part j of copy 0, rank
// p-1-j part j of copy 1; the middle rank of an odd p holds both). Each copy's accumulators are
// replaced by the sum of both, exactly (int64 limbs, as over replicas), so both holders finalize
// and update the same gradients and the copies stay identical. Runs after the replica all-reduce:
// integer sums in any order give the same bits. Ranks walk their parts in ascending order, so the
// two holders of a part meet in the same exchange.
template <class T>
void Trainer<T>::sum_model_copies() {
  if (plan_.chains == 1) return;
  if (plan_.chains != 2)
    throw std::logic_error("schedule '" + plan_.name + "': " + std::to_string(plan_.chains) +
                           " model copies; the gradient sum supports 2");
  ProfileRegion region("Trainer::sum_model_copies");
  CollectiveGuard guard(timeout_, "the gradient sum of the two model copies");
  const int L = plan_.chain_length();
  std::vector<Stage<T>*> by_part(static_cast<std::size_t>(L), nullptr), twin(static_cast<std::size_t>(L), nullptr);
  for (auto& s : stages_) {
    const std::size_t j = static_cast<std::size_t>(plan_.part_of(s.id()));
    (by_part[j] ? twin[j] : by_part[j]) = &s;
  }
  for (int j = 0; j < L; ++j) {
    Stage<T>* a = by_part[static_cast<std::size_t>(j)];
    if (!a) continue;
    Stage<T>* b = twin[static_cast<std::size_t>(j)];  // the other copy on this rank (odd p's middle)
    const int peer = plan_.stage_to_rank.at(static_cast<std::size_t>(a->copy() == 0 ? j + L : j));
    std::vector<GradAccum<T>*> exact, exact_twin;
    for (std::size_t k = 0; k < a->params().size(); ++k) {
      GradAccum<T>* other = b ? &b->params()[k].acc : nullptr;
      if (a->params()[k].acc.mode == Mode::deterministic) {
        exact.push_back(&a->params()[k].acc);
        if (other) exact_twin.push_back(other);
      } else {
        add_copy_partials(a->params()[k].acc, other, peer, j);
      }
    }
    add_copy_limbs(exact, exact_twin, peer, j);
    merge_copy_flags(*a, b, peer, j);
  }
}

// Each of accs (and of twins, the other copy's accumulators on this rank, if any) = itself + the
// other copy's, on the limbs, a batch at a time; the other copy comes from `peer` when there is
// no twin (one fence and one exchange per batch).
template <class T>
void Trainer<T>::add_copy_limbs(const std::vector<GradAccum<T>*>& accs, const std::vector<GradAccum<T>*>& twins,
                                int peer, int tag) {
  const bool host_readable = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;
  const bool direct = host_readable || path_ == CommPath::device_buffers;
  for (const auto& batch : limb_batches(accs)) {
    const std::size_t words = batch_limbs(batch);
    if (words > static_cast<std::size_t>(INT_MAX))
      throw std::runtime_error(batch.front().acc->name + ": too many gradient limbs for one MPI message");
    if (limbs_.extent(0) < words) limbs_ = LimbView("Trainer::limbs", words);
    if (copy_limbs_.extent(0) < words) copy_limbs_ = LimbView("Trainer::copy_limbs", words);
    for (const auto& pc : batch)
      ExactLimbs::pack(pc.acc->exact(), pc.first, pc.len, limb_range(limbs_, pc.offset, pc.limbs()));
    if (!twins.empty()) {
      for (const auto& pc : batch)
        ExactLimbs::pack(twins[pc.index]->exact(), pc.first, pc.len, limb_range(copy_limbs_, pc.offset, pc.limbs()));
    } else {
      fence_space(ExecSpace(), "Trainer::sum_model_copies::fence");
      if (direct) {
        exchange(limbs_.data(), copy_limbs_.data(), static_cast<int>(words), MPI_INT64_T, peer, tag);
      } else {
        if (host_limbs_.extent(0) < 2 * words)
          host_limbs_ = Kokkos::View<std::int64_t*, HostSpace>("Trainer::host_limbs", 2 * words);
        auto mine = Kokkos::subview(host_limbs_, std::make_pair(std::size_t(0), words));
        auto theirs = Kokkos::subview(host_limbs_, std::make_pair(words, 2 * words));
        blocking_copy(mine, limb_range(limbs_, 0, words));
        exchange(mine.data(), theirs.data(), static_cast<int>(words), MPI_INT64_T, peer, tag);
        blocking_copy(limb_range(copy_limbs_, 0, words), theirs);
      }
    }
    add_into(limbs_, copy_limbs_, words);
    for (const auto& pc : batch) {
      const LimbView sum = limb_range(limbs_, pc.offset, pc.limbs());
      ExactLimbs::unpack(sum, pc.first, pc.len, pc.acc->exact(), pc.acc->overflow);
      pc.acc->mark_written();
      if (!twins.empty()) {
        GradAccum<T>& twin = *twins[pc.index];
        ExactLimbs::unpack(sum, pc.first, pc.len, twin.exact(), twin.overflow);
        twin.mark_written();
      }
    }
  }
}

// Fast mode: the float partials, a + b == b + a in IEEE arithmetic, so both copies get one sum.
template <class T>
void Trainer<T>::add_copy_partials(GradAccum<T>& acc, GradAccum<T>* twin, int peer, int tag) {
  const std::size_t n = acc.size();
  if (copy_sum_.extent(0) < n) copy_sum_ = View1<T>("Trainer::copy_sum", n);
  const View1<T> x = acc.sum, y = copy_sum_;
  if (twin) {
    Kokkos::deep_copy(ExecSpace(), Kokkos::subview(y, std::make_pair(std::size_t(0), n)), twin->sum);
  } else {
    fence_space(ExecSpace(), "Trainer::sum_model_copies::fence");
    const bool host_readable = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;
    if (host_readable || path_ == CommPath::device_buffers) {
      exchange(x.data(), y.data(), static_cast<int>(n), mpi_type<T>(), peer, tag);
    } else {
      auto mine = Kokkos::create_mirror_view(x);
      auto theirs = Kokkos::create_mirror_view(y);
      blocking_copy(mine, x);
      exchange(mine.data(), theirs.data(), static_cast<int>(n), mpi_type<T>(), peer, tag);
      blocking_copy(y, theirs);
    }
  }
  add_into(x, y, n);
  if (twin) Kokkos::deep_copy(ExecSpace(), twin->sum, x);
}

// An overflow in either copy is an overflow of the sum: both holders keep the larger flag.
template <class T>
void Trainer<T>::merge_copy_flags(Stage<T>& a, Stage<T>* twin, int peer, int tag) {
  // The flags on the host: the views themselves where the host can read them, else mirrors
  // filled by blocking copies (each counted as a host synchronization).
  fence_space(ExecSpace(), "Trainer::sum_model_copies::fence");
  auto on_host = [](const auto& flags) {
    auto h = Kokkos::create_mirror_view(flags);
    if (h.data() != flags.data()) blocking_copy(h, flags);
    return h;
  };
  auto mine = on_host(a.overflow_flags());
  std::vector<int> theirs(mine.extent(0));
  if (twin) {
    auto h = on_host(twin->overflow_flags());
    for (std::size_t i = 0; i < theirs.size(); ++i) theirs[i] = h(i);
  } else {
    exchange(mine.data(), theirs.data(), static_cast<int>(theirs.size()), MPI_INT, peer, tag);
  }
  for (std::size_t i = 0; i < theirs.size(); ++i) mine(i) = std::max(mine(i), theirs[i]);
  if (mine.data() != a.overflow_flags().data()) blocking_copy(a.overflow_flags(), mine);
  if (twin) blocking_copy(twin->overflow_flags(), mine);
}

template <class T>
void Trainer<T>::update(int step, RankStepStats& st, StepObserver<T>* observer) {
  ProfileRegion r("Pipeline::optimizer");
  for (auto& s : stages_) {
    if (observer) observer->grads_ready(s);
    const std::vector<NonFinite> bad = s.optimizer_step(opt_, step + 1);
    for (std::size_t k = 0; k < bad.size(); ++k)
      if (bad[k])
        note_non_finite(
            st, describe_non_finite(bad[k], "step " + std::to_string(step) + " / stage " + std::to_string(s.id()) +
                                                " / " + s.params()[k].spec.name + " after the optimizer"));
    if (observer) observer->params_updated(s);
  }
  fence_space(ExecSpace(), "Pipeline::optimizer::fence");
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace minipipe
