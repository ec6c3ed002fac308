// Executor: one loop over the rank's action list, with no schedule-specific branch. Receives are
// posted where the list puts them, sends are nonblocking, staging copies run on their own
// execution-space instance, and the producing instance is fenced before MPI reads a buffer.
#include "miniapp/runtime/executor.hpp"

#include "kernels/finite_check.hpp"
#include "miniapp/mpi/peer_wait.hpp"
#include "miniapp/runtime/test_delays.hpp"

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace minipipe {

namespace {

std::string where(int rank, const sched::Action& a) {
  std::ostringstream os;
  os << "rank " << rank << ", action " << sched::to_string(a) << " (stage " << a.stage << ", micro-batch "
     << a.microbatch << ")";
  return os.str();
}

}  // namespace

template <class T>
bool Executor<T>::Key::operator<(const Key& o) const {
  return std::tie(dir, stage, mb) < std::tie(o.dir, o.stage, o.mb);
}

// Sees every boundary tensor of the step: checks it for NaN/inf (one device reduction into the
// step's next check slot, no host wait) and forwards it to the caller's observer, timed, so that
// dump I/O inside an action is neither compute nor idle.
template <class T>
class Executor<T>::Watch final : public TensorObserver<T> {
 public:
  Watch(TensorObserver<T>* inner, FiniteChecks& checks, double t0) : inner_(inner), checks_(checks), t0_(t0) {}
  void activation(const std::string& layer, const MicroBatch& mb, CMat<T> x) override {
    check(layer, mb, x, "activation");
    if (inner_) timed([&] { inner_->activation(layer, mb, x); });
  }
  void input_grad(const std::string& layer, const MicroBatch& mb, CMat<T> dx) override {
    check(layer, mb, dx, "input gradient");
    if (inner_) timed([&] { inner_->input_grad(layer, mb, dx); });
  }
  void kernel_output(const std::string& layer, const char* name, const MicroBatch& mb, CMat<T> x) override {
    if (inner_) timed([&] { inner_->kernel_output(layer, name, mb, x); });
  }
  bool wants_kernel_outputs() const override { return inner_ && inner_->wants_kernel_outputs(); }
  double seconds = 0;
  int stage = -1;  // of the action running

 private:
  template <class F>
  void timed(F&& f) {
    const double t = MPI_Wtime();
    f();
    seconds += MPI_Wtime() - t;
  }
  void check(const std::string& layer, const MicroBatch& mb, CMat<T> x, const char* what) {
    const std::size_t slot = checks_.sites.size();
    if (slot >= checks_.codes.extent(0)) {  // first step only: keep the codes issued so far
      Kokkos::View<std::int64_t*, MemSpace> more("Pipeline::finite_codes", 2 * slot + 64);
      if (slot > 0)
        Kokkos::deep_copy(ExecSpace(), Kokkos::subview(more, std::make_pair(std::size_t(0), slot)), checks_.codes);
      checks_.codes = more;
    }
    FiniteCheck<T>::lowest_code_to(x, checks_.codes, slot);
    checks_.sites.push_back({stage, mb.index, layer, what, MPI_Wtime() - t0_});
  }
  TensorObserver<T>* inner_;
  FiniteChecks& checks_;
  double t0_;
};

// One copy of the step's check codes; the first non-finite one (in check order) becomes the
// step's non_finite, with the text and clock of the check that found it.
template <class T>
void Executor<T>::read_finite_checks() {
  const std::size_t n = checks_.sites.size();
  if (n == 0) return;
  if (checks_.host.extent(0) < n)
    checks_.host = Kokkos::View<std::int64_t*, HostSpace>("Pipeline::finite_codes_host", checks_.codes.extent(0));
  blocking_copy(Kokkos::subview(checks_.host, std::make_pair(std::size_t(0), n)),
                Kokkos::subview(checks_.codes, std::make_pair(std::size_t(0), n)));
  for (std::size_t i = 0; i < n; ++i) {
    const NonFinite bad = decode_non_finite(checks_.host(i));
    if (!bad) continue;
    const typename FiniteChecks::Site& s = checks_.sites[i];
    stats_->non_finite = {
        true, s.time,
        describe_non_finite(bad, "step " + std::to_string(step_) + " / stage " + std::to_string(s.stage) + " / " +
                                     s.layer + " / micro-batch " + std::to_string(s.microbatch) + " / " + s.what)};
    return;
  }
}

template <class T>
Executor<T>::Executor(MPI_Comm comm, const sched::Schedule& plan, std::vector<Stage<T>>& stages, CommPath path,
                      int seq_len, int channels, double timeout_s, bool action_fence)
    : comm_(comm),
      num_stages_(plan.num_stages()),
      m_(plan.m),
      tag_ub_(mpi_tag_ub(comm)),
      seq_len_(seq_len),
      channels_(channels),
      path_(path),
      action_fence_(action_fence),
      transfer_(transfer_instance()),
      defer_posts_(kTransferQueueOfItsOwn || test_delays().defer_staged_posts),
      stage_to_rank_(plan.stage_to_rank),
      stages_(stages),
      timeout_(timeout_s) {
  MPI_Comm_rank(comm_, &rank_);
  actions_ = plan.ranks.at(static_cast<std::size_t>(rank_));
  for (std::size_t i = 0; i < stages_.size(); ++i) local_index_[stages_[i].id()] = static_cast<int>(i);
}

template <class T>
RankStepStats Executor<T>::run(int step, const std::vector<MicroBatch>& mbs, const StepInputs<T>& in,
                               TensorObserver<T>* observer) {
  RankStepStats stats;
  {
    CollectiveGuard guard(
        timeout_, "the start of step " + std::to_string(step) + " on every rank of the pipeline (" +
                      std::to_string(stage_to_rank_.empty()
                                         ? 0
                                         : *std::max_element(stage_to_rank_.begin(), stage_to_rank_.end()) + 1) +
                      " ranks)");
    MPI_Barrier(comm_);
  }
  t0_ = MPI_Wtime();
  checks_.sites.clear();
  Watch watch(observer, checks_, t0_);
  // Stages see the timed observer for this step only, also when an action throws.
  struct Detach {
    std::vector<Stage<T>>& stages;
    ~Detach() {
      for (auto& s : stages) s.observe(nullptr);
    }
  } detach{stages_};
  for (auto& s : stages_) s.observe(&watch);
  mbs_ = &mbs, in_ = &in, stats_ = &stats, watch_ = &watch, step_ = step;
  for (std::size_t i = 0; i < actions_.size(); ++i) {
    const sched::Action& a = actions_[i];
    try {
      dispatch(a);
      reap_sends(false);
      if (after_action_) after_action_(i);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      std::ostringstream os;
      os << "step " << step << ", " << where(rank_, a) << ": " << e.what();
      throw std::runtime_error(os.str());
    }
  }
  // The step's end: every staged send posted, the compute instance idle (the makespan and the
  // host's reads after the step need it; with per-action fences it already is).
  fence_transfers();
  if (compute_unfenced_) fence_compute("Pipeline::step_end::fence");
  {
    ProfileRegion r("Pipeline::wait_sends");
    const double w0 = now();
    reap_sends(true);
    stats.comm_wait += now() - w0;
  }
  check_drained(step);
  read_finite_checks();
  stats.makespan = now();
  mbs_ = nullptr, in_ = nullptr, stats_ = nullptr, watch_ = nullptr;
  return stats;
}

template <class T>
void Executor<T>::dispatch(const sched::Action& a) {
  switch (a.op) {
    case sched::Op::RECV_F:
      return post_recv(kFwd, a);
    case sched::Op::RECV_B:
      return post_recv(kBwd, a);
    case sched::Op::SEND_F:
      return post_send(kFwd, a);
    case sched::Op::SEND_B:
      return post_send(kBwd, a);
    default:
      return compute(a);
  }
}

// Posts the receive of the tensor consumed by (dir, stage, mb).
template <class T>
void Executor<T>::post_recv(Dir dir, const sched::Action& a) {
  const Key k{dir, a.stage, a.microbatch};
  if (recvs_.count(k)) throw std::logic_error(where(rank_, a) + ": this receive was posted twice");
  ProfileRegion region(dir == kFwd ? "Pipeline::post_recv_F" : "Pipeline::post_recv_B");
  const int peer = peer_of(dir == kFwd ? a.stage - 1 : a.stage + 1, a);
  Pending p;
  p.dev = take_free(rows_of(a.microbatch));
  void* buf = p.dev.data();
  if (path_ == CommPath::host_staging) {
    p.host = take_staging(p.dev.extent(0));
    buf = p.host.data();
  }
  MPI_Irecv(buf, count_of(p.dev, a), mpi_type<T>(), peer, tag(dir, a.stage, a.microbatch), comm_, &p.req);
  recvs_.emplace(k, p);
}

// Sends the tensor produced by (dir, stage, mb) to the neighbouring stage's rank.
template <class T>
void Executor<T>::post_send(Dir dir, const sched::Action& a) {
  auto it = outputs_.find(Key{dir, a.stage, a.microbatch});
  if (it == outputs_.end())
    throw std::logic_error(where(rank_, a) + ": nothing to send (its compute action has not run)");
  const int peer_stage = dir == kFwd ? a.stage + 1 : a.stage - 1;
  const int peer = peer_of(peer_stage, a);
  ProfileRegion region(dir == kFwd ? "Pipeline::send_F" : "Pipeline::send_B");
  Pending p;
  p.dev = it->second;
  outputs_.erase(it);
  p.peer = peer, p.tag = tag(dir, peer_stage, a.microbatch), p.count = count_of(p.dev, a);
  // The producing kernels ran on the compute instance: it is fenced before MPI or the transfer
  // instance reads the buffer (after each action already, with the per-action fence).
  if (compute_unfenced_) fence_compute("Pipeline::send::fence");
  if (path_ == CommPath::host_staging) {
    // The copy runs on the transfer instance; its send is posted at the next progress point
    // (where the transfer instance is a queue of its own).
    p.host = take_staging(p.dev.extent(0));
    Kokkos::deep_copy(transfer_, p.host, p.dev);
    transfer_unfenced_ = true;
    staged_.push_back(p);
    // Without a queue of its own the copy ran when issued, and the next action would run before
    // a deferred post (a host backend executes as it enqueues): post now.
    if (!defer_posts_) fence_transfers();
    return;
  }
  delay_send_for_test();
  MPI_Isend(p.dev.data(), p.count, mpi_type<T>(), p.peer, p.tag, comm_, &p.req);
  sends_.push_back(p);
}

// The compute instance's fence: what it wrote is complete, and the buffers compute actions gave
// back since its last fence may go to MPI or the transfer instance.
template <class T>
void Executor<T>::fence_compute(const char* label) {
  fence_space(ExecSpace(), label);
  compute_unfenced_ = false;
  for (auto& [rows, list] : retired_) {
    auto& free = pool_[rows];
    free.insert(free.end(), list.begin(), list.end());
    list.clear();
  }
}

// The transfer instance's fence (when it has copies in flight), then the staged sends it made
// ready are posted.
template <class T>
void Executor<T>::fence_transfers() {
  if (transfer_unfenced_) fence_space(transfer_, "Pipeline::transfer::fence");
  transfer_unfenced_ = false;
  for (Pending& p : staged_) {
    delay_send_for_test();
    MPI_Isend(p.host.data(), p.count, mpi_type<T>(), p.peer, p.tag, comm_, &p.req);
    sends_.push_back(p);
  }
  staged_.clear();
}

// A completed staged receive: its host-to-device copy, on the transfer instance.
template <class T>
void Executor<T>::copy_received(Pending& p) {
  Kokkos::deep_copy(transfer_, p.dev, p.host);
  transfer_unfenced_ = true;
  p.copied = true;
}

// A progress point, after a compute action's kernels are enqueued: the receives that completed
// meanwhile get their host-to-device copies, and staged sends are posted (the transfer instance's
// fence waits for copies that ran beside the compute action just enqueued).
template <class T>
void Executor<T>::progress() {
  if (path_ != CommPath::host_staging) return;
  for (auto& [key, p] : recvs_) {
    if (p.copied) continue;
    int done = 0;
    MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
    if (done) copy_received(p);
  }
  if (!staged_.empty()) fence_transfers();
}

// The input tensor of (dir, stage, mb): a completed receive or a local hand-off.
template <class T>
View2<T> Executor<T>::input_of(Dir dir, const sched::Action& a) {
  auto it = recvs_.find(Key{dir, a.stage, a.microbatch});
  if (it == recvs_.end()) {
    // Local hand-off: the neighbouring stage lives on this rank.
    const int producer = dir == kFwd ? a.stage - 1 : a.stage + 1;
    auto ot = outputs_.find(Key{dir, producer, a.microbatch});
    if (ot == outputs_.end())
      throw std::logic_error(where(rank_, a) + ": its input from stage " + std::to_string(producer) +
                             " was neither received nor produced on this rank");
    View2<T> v = ot->second;
    outputs_.erase(ot);
    return v;
  }
  Pending p = it->second;
  recvs_.erase(it);
  if (!p.copied) {
    ProfileRegion r("Pipeline::wait_recv");
    const double w0 = now();
    const int peer = peer_of(dir == kFwd ? a.stage - 1 : a.stage + 1, a);
    int done = 0;
    MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
    // Before blocking: this rank's staged sends are posted, so no peer waits on them meanwhile.
    if (!done) fence_transfers();
    wait_for_peer(p.req, timeout_, [&] { return describe_wait(dir == kFwd ? "activation" : "gradient", peer, a); });
    stats_->comm_wait += now() - w0;
    if (path_ == CommPath::host_staging) copy_received(p);
  }
  if (path_ == CommPath::host_staging) {
    fence_transfers();  // the consumer's kernels read p.dev
    give_staging(p.host);
  }
  return p.dev;
}

// Runs one compute action (OVERLAP_F_B runs its two parts in order).
template <class T>
void Executor<T>::compute(const sched::Action& a) {
  if (a.op == sched::Op::OVERLAP_F_B) {
    for (const auto& sub : a.sub) compute(sub);
    return;
  }
  const bool fwd = a.op == sched::Op::F, bwd = sched::is_backward(a.op);
  if (!fwd && !bwd && a.op != sched::Op::W) throw std::logic_error(where(rank_, a) + ": not a compute action");
  if (a.microbatch < 0 || a.microbatch >= m_) throw std::logic_error(where(rank_, a) + ": micro-batch out of range");
  Stage<T>& s = stage_of(a);
  const MicroBatch& mb = (*mbs_)[static_cast<std::size_t>(a.microbatch)];
  ProfileRegion region(std::string("Pipeline::") + sched::to_string(a));
  // Inputs first: waiting for a boundary tensor is exposed communication, not compute.
  View2<T> input;
  const double waited0 = stats_->comm_wait;
  if (fwd && !s.is_first()) input = input_of(kFwd, a);
  if (bwd && !s.is_last()) input = input_of(kBwd, a);
  const double waited = stats_->comm_wait - waited0;
  const double c0 = now();
  watch_->stage = a.stage;
  const double observed0 = watch_->seconds;
  if (fwd) {
    View2<T> y = s.is_last() ? View2<T>() : take(rows_of(a.microbatch));
    s.forward(mb, *in_, input, y);
    if (!s.is_last()) outputs_[Key{kFwd, a.stage, a.microbatch}] = y;
  } else if (bwd) {
    View2<T> dx = s.is_first() ? View2<T>() : take(rows_of(a.microbatch));
    // B: I and W in one call; Stage::backward orders their kernels.
    if (a.op == sched::Op::B)
      s.backward(mb, *in_, input, dx);
    else
      s.backward_input(mb, *in_, input, dx);
    if (!s.is_first()) outputs_[Key{kBwd, a.stage, a.microbatch}] = dx;
  } else {
    s.backward_weight(mb, *in_);
  }
  compute_unfenced_ = true;
  progress();  // staged copies run beside the kernels just enqueued
  if (action_fence_) fence_compute("Pipeline::compute::fence");
  if (fwd) delay_forward_for_test(a.stage);
  give(input);
  // Observers (device-to-host copies, HDF5 writes) ran inside the action: not compute.
  const double observed = watch_->seconds - observed0;
  stats_->observer_io += observed;
  record(a, c0, now() - observed, (a.op == sched::Op::B || a.op == sched::Op::W) && s.last_w_added_held());
  stats_->actions.back().wait = waited;  // the time budget's link model reads it
  note_memory(s);
}

template <class T>
void Executor<T>::record(const sched::Action& a, double start, double end, bool adds_held) {
  RankStepStats& st = *stats_;
  const double d = end - start;
  switch (a.op) {
    case sched::Op::F:
      st.time_F += d;
      break;
    case sched::Op::I:
      st.time_I += d;
      break;
    case sched::Op::W:
      st.time_W += d;
      break;
    default:
      st.time_B += d;
      break;
  }
  st.actions.push_back({a.op, a.stage, a.microbatch, start, end, adds_held});
}

// `ran`: the stage of the action just run, whose store may have peaked inside the action (the
// recomputed values and gradients of a B action live only within it).
template <class T>
void Executor<T>::note_memory(const Stage<T>& ran) {
  int count = 0;
  std::size_t bytes = 0, scratch = 0;
  for (const auto& s : stages_)
    count += s.stored_microbatches(), bytes += s.stored_bytes(), scratch += s.workspace_bytes();
  const std::size_t inside =
      ran.action_peak_bytes() > ran.stored_bytes() ? ran.action_peak_bytes() - ran.stored_bytes() : 0;
  stats_->workspace_bytes = std::max(stats_->workspace_bytes, scratch);
  stats_->peak_stored_mb = std::max(stats_->peak_stored_mb, count);
  stats_->peak_stored_bytes = std::max(stats_->peak_stored_bytes, bytes + inside);
}

// Completed sends return their buffers to the pool.
template <class T>
void Executor<T>::reap_sends(bool wait_all) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    if (wait_all) {
      wait_for_peer(it->req, timeout_, [&] {
        return "step " + std::to_string(step_) + ", rank " + std::to_string(rank_) +
               ": the completion of a boundary send (" + std::to_string(it->dev.size()) + " elements)";
      });
      done = 1;
    } else {
      MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
    }
    if (done) {
      give(it->dev);
      give_staging(it->host);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
}

template <class T>
void Executor<T>::check_drained(int step) const {
  if (recvs_.empty() && outputs_.empty()) return;
  std::ostringstream os;
  os << "step " << step << ", rank " << rank_ << ": " << recvs_.size() << " receive(s) and " << outputs_.size()
     << " produced tensor(s) were never consumed; the schedule's communication does not match its compute";
  throw std::runtime_error(os.str());
}

template <class T>
std::string Executor<T>::describe_wait(const char* what, int peer, const sched::Action& a) const {
  return std::string("the ") + what + " of micro-batch " + std::to_string(a.microbatch) + " for action " +
         sched::to_string(a) + " from rank " + std::to_string(peer);
}

// A compute action's output: a buffer the compute instance may still read (kernels enqueued
// before it in order) is as good as a free one.
template <class T>
View2<T> Executor<T>::take(std::size_t rows) {
  auto& v = retired_[rows];
  if (!v.empty()) {
    View2<T> b = v.back();
    v.pop_back();
    return b;
  }
  return take_free(rows);
}

// A buffer no enqueued kernel uses any more. The pools reach their size in the first step (the
// action list is the same every step, and its end fences the compute instance).
template <class T>
View2<T> Executor<T>::take_free(std::size_t rows) {
  auto& v = pool_[rows];
  if (!v.empty()) {
    View2<T> b = v.back();
    v.pop_back();
    return b;
  }
  return View2<T>(Kokkos::view_alloc("Pipeline::boundary", Kokkos::WithoutInitializing), rows,
                  static_cast<std::size_t>(channels_));
}

template <class T>
void Executor<T>::give(const View2<T>& buffer) {
  if (buffer.data()) (compute_unfenced_ ? retired_ : pool_)[buffer.extent(0)].push_back(buffer);
}

template <class T>
typename Executor<T>::Staging Executor<T>::take_staging(std::size_t rows) {
  auto& v = staging_pool_[rows];
  if (!v.empty()) {
    Staging b = v.back();
    v.pop_back();
    return b;
  }
  return Staging(Kokkos::view_alloc("Pipeline::staging", Kokkos::WithoutInitializing), rows,
                 static_cast<std::size_t>(channels_));
}

template <class T>
void Executor<T>::give_staging(const Staging& buffer) {
  if (buffer.data()) staging_pool_[buffer.extent(0)].push_back(buffer);
}

template <class T>
int Executor<T>::tag(Dir dir, int stage, int mb) const {
  const long long t = (static_cast<long long>(dir) * num_stages_ + stage) * m_ + mb;
  if (t > tag_ub_)
    throw InputError("pipeline: message tag " + std::to_string(t) + " exceeds MPI_TAG_UB = " + std::to_string(tag_ub_) +
                     " (too many stages x micro-batches for this MPI)");
  return static_cast<int>(t);
}

template <class T>
int Executor<T>::count_of(const View2<T>& v, const sched::Action& a) const {
  if (v.size() > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error(where(rank_, a) + ": boundary tensor of " + std::to_string(v.size()) +
                             " elements exceeds MPI's int count; use more micro-batches");
  return static_cast<int>(v.size());
}

template <class T>
int Executor<T>::peer_of(int stage, const sched::Action& a) const {
  if (stage < 0 || stage >= num_stages_)
    throw std::logic_error(where(rank_, a) + ": no neighbouring stage " + std::to_string(stage));
  return stage_to_rank_[static_cast<std::size_t>(stage)];
}

template <class T>
Stage<T>& Executor<T>::stage_of(const sched::Action& a) {
  auto it = local_index_.find(a.stage);
  if (it == local_index_.end())
    throw std::logic_error(where(rank_, a) + ": stage " + std::to_string(a.stage) + " does not live on this rank");
  return stages_[static_cast<std::size_t>(it->second)];
}

template <class T>
std::size_t Executor<T>::rows_of(int mb) const {
  return static_cast<std::size_t>((*mbs_)[static_cast<std::size_t>(mb)].nsamples) * static_cast<std::size_t>(seq_len_);
}

template <class T>
double Executor<T>::now() const {
  return MPI_Wtime() - t0_;
}

template class Executor<float>;
template class Executor<double>;

}  // namespace minipipe
