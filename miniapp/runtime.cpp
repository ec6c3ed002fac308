// Pipeline runtime: one loop over the rank's lowered action list. It has no schedule-specific
// branches: what runs when is entirely the schedule's; this file only executes actions.
#include "runtime.hpp"

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include "kernels/exact_sum.hpp"

namespace minipipe {

const char* to_string(CommPath p) {
  switch (p) {
    case CommPath::host_memory:
      return "host memory (buffers are host-resident; no staging needed)";
    case CommPath::device_buffers:
      return "device buffers passed to CUDA-aware MPI";
    case CommPath::host_staging:
      return "host staging through mirrors";
  }
  return "?";
}

CommPath choose_comm_path(const std::string& cuda_aware, std::string& why) {
  const bool host_accessible = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;
  // Only the query that matches the backend counts: a CUDA-aware Open MPI says nothing about
  // HIP buffers.
  bool compiled = false, runtime = false;
#if defined(KOKKOS_ENABLE_CUDA) && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  compiled = true;
  runtime = MPIX_Query_cuda_support() == 1;
#elif defined(KOKKOS_ENABLE_HIP) && defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
  compiled = true;
  runtime = MPIX_Query_rocm_support() == 1;
#endif
  std::ostringstream os;
  os << "GPU-aware MPI (MPIX_CUDA/ROCM_AWARE_SUPPORT) at compile time: " << (compiled ? "yes" : "no")
     << ", at run time (MPIX_Query_*_support): " << (runtime ? "yes" : "no") << ", memory space: " << MemSpace::name()
     << ", pipeline.cuda_aware = " << cuda_aware;
  why = os.str();
  if (cuda_aware == "off") return CommPath::host_staging;
  if (cuda_aware == "on") return host_accessible ? CommPath::host_memory : CommPath::device_buffers;
  if (cuda_aware != "auto")
    throw InputError("deck: key 'pipeline.cuda_aware' has value \"" + cuda_aware + "\"; allowed: auto | on | off");
  if (host_accessible) return CommPath::host_memory;
  return runtime ? CommPath::device_buffers : CommPath::host_staging;
}

namespace {

enum Dir { kFwd = 0, kBwd = 1 };

// Key of a boundary tensor: direction, the stage that consumes it, micro-batch.
struct Key {
  int dir, stage, mb;
  bool operator<(const Key& o) const { return std::tie(dir, stage, mb) < std::tie(o.dir, o.stage, o.mb); }
};

template <class T>
MPI_Datatype mpi_type() {
  return sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}

std::string where(int rank, const sched::Action& a) {
  std::ostringstream os;
  os << "rank " << rank << ", action " << sched::to_string(a) << " (stage " << a.stage << ", micro-batch "
     << a.microbatch << ")";
  return os.str();
}

}  // namespace

template <class T>
struct Pipeline<T>::Impl {
  struct Pending {
    MPI_Request req = MPI_REQUEST_NULL;
    View2<T> dev;                                            // tensor on the device
    Kokkos::View<T**, Kokkos::LayoutRight, HostSpace> host;  // staging mirror (host_staging only)
  };
  CommPath path = CommPath::host_memory;
  int num_stages = 0, m = 0, tag_ub = 0;
  std::map<Key, Pending> recvs;     // posted receives (and local hand-offs, req = NULL)
  std::vector<Pending> sends;       // sends in flight
  std::map<Key, View2<T>> outputs;  // produced, not yet sent or handed over: (dir, producing stage, mb)
  std::map<std::size_t, std::vector<View2<T>>> pool;  // free boundary buffers by row count

  View2<T> take(std::size_t rows, std::size_t C) {
    auto& v = pool[rows];
    if (!v.empty()) {
      View2<T> b = v.back();
      v.pop_back();
      return b;
    }
    return View2<T>(Kokkos::view_alloc("Pipeline::boundary", Kokkos::WithoutInitializing), rows, C);
  }
  void give(const View2<T>& b) {
    if (b.data()) pool[b.extent(0)].push_back(b);
  }
  int tag(int dir, int stage, int mb) const {
    const long long t = (static_cast<long long>(dir) * num_stages + stage) * m + mb;
    if (t > tag_ub)
      throw InputError("pipeline: message tag " + std::to_string(t) + " exceeds MPI_TAG_UB = " +
                       std::to_string(tag_ub) + " (too many stages x micro-batches for this MPI)");
    return static_cast<int>(t);
  }
  // Reaps completed sends so their buffers return to the pool.
  void reap_sends(bool wait_all) {
    for (auto it = sends.begin(); it != sends.end();) {
      int done = 0;
      if (wait_all)
        MPI_Wait(&it->req, MPI_STATUS_IGNORE), done = 1;
      else
        MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
      if (done) {
        give(it->dev);
        it = sends.erase(it);
      } else {
        ++it;
      }
    }
  }
};

template <class T>
std::vector<MicroBatch> Pipeline<T>::split(int B, int m) {
  std::vector<MicroBatch> out;
  int s0 = 0;
  for (int i = 0; i < m; ++i) {
    const int n = B / m + (i < B % m ? 1 : 0);
    out.push_back({i, s0, n});
    s0 += n;
  }
  return out;
}

template <class T>
Pipeline<T>::Pipeline(MPI_Comm comm, const ModelShape& shape, const StageLayout& layout, const sched::Schedule& lowered,
                      Mode mode, std::uint64_t seed, CommPath path)
    : impl_(std::make_unique<Impl>()), comm_(comm), shape_(shape), schedule_(lowered) {
  MPI_Comm_rank(comm_, &rank_);
  impl_->path = path;
  impl_->num_stages = lowered.num_stages();
  impl_->m = lowered.m;
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
  impl_->tag_ub = flag && ub ? *ub : 32767;
  for (int s = 0; s < lowered.num_stages(); ++s) {
    if (lowered.stage_to_rank.at(s) != rank_) continue;
    local_index_[s] = static_cast<int>(stages_.size());
    stages_.emplace_back(shape, layout, s, mode, seed);
  }
}

template <class T>
Pipeline<T>::~Pipeline() = default;

template <class T>
StepResult Pipeline<T>::run_step(int step, const Batch& batch, const OptimizerConfig& opt) {
  Impl& im = *impl_;
  const int T_ = shape_.seq_len, C = shape_.channels;
  const auto mbs = split(batch.B, schedule_.m);
  StepResult res;
  res.sample_loss.assign(batch.B, 0.0);
  res.sample_tokens.assign(batch.B, 0);
  RankStepStats& st = res.stats;

  // The global batch on the device (every rank holds it: the first stage needs tokens, the last
  // targets, and both are a few bytes per token).
  StepInputs<T> in;
  in.tokens = Kokkos::View<int*, MemSpace>("Pipeline::tokens", batch.tokens.size());
  in.targets = Kokkos::View<int*, MemSpace>("Pipeline::targets", batch.targets.size());
  {
    Kokkos::View<const int*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> ht(batch.tokens.data(),
                                                                                    batch.tokens.size());
    Kokkos::View<const int*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> hg(batch.targets.data(),
                                                                                    batch.targets.size());
    Kokkos::deep_copy(in.tokens, ht);
    Kokkos::deep_copy(in.targets, hg);
  }
  in.global_valid_tokens = batch.valid_tokens();
  if (in.global_valid_tokens <= 0)
    throw InputError("data: step " + std::to_string(step) + " has no valid target token in the global batch");

  for (auto& s : stages_) {
    s.zero_grads();
    s.on_loss = [&res](const MicroBatch& mb, const std::vector<double>& ls, const std::vector<int>& vs) {
      for (int i = 0; i < mb.nsamples; ++i) {
        res.sample_loss[mb.sample0 + i] = ls[i];
        res.sample_tokens[mb.sample0 + i] = vs[i];
      }
    };
  }

  const auto& actions = schedule_.ranks.at(rank_);
  MPI_Barrier(comm_);
  const double t0 = MPI_Wtime();
  auto now = [t0] { return MPI_Wtime() - t0; };
  auto rows_of = [&](int mb) { return static_cast<std::size_t>(mbs.at(mb).nsamples) * T_; };
  auto stage_of = [&](int s, const sched::Action& a) -> Stage<T>& {
    auto it = local_index_.find(s);
    if (it == local_index_.end())
      throw std::logic_error(where(rank_, a) + ": stage " + std::to_string(s) + " does not live on this rank");
    return stages_[it->second];
  };
  auto note_memory = [&] {
    int count = 0;
    std::size_t bytes = 0;
    for (auto& s : stages_) count += s.stored_microbatches(), bytes += s.stored_bytes();
    st.peak_stored_mb = std::max(st.peak_stored_mb, count);
    st.peak_stored_bytes = std::max(st.peak_stored_bytes, bytes);
  };

  // Posts a receive of the tensor consumed by (dir, stage, mb).
  auto count_of = [&](const View2<T>& v, const sched::Action& a) {
    if (v.size() > static_cast<std::size_t>(INT_MAX))
      throw std::runtime_error(where(rank_, a) + ": boundary tensor of " + std::to_string(v.size()) +
                               " elements exceeds MPI's int count; use more micro-batches");
    return static_cast<int>(v.size());
  };
  auto post_recv = [&](int dir, const sched::Action& a) {
    const Key k{dir, a.stage, a.microbatch};
    if (im.recvs.count(k)) return;
    ProfileRegion region(dir == kFwd ? "Pipeline::post_recv_F" : "Pipeline::post_recv_B");
    const int peer_stage = dir == kFwd ? a.stage - 1 : a.stage + 1;
    if (peer_stage < 0 || peer_stage >= im.num_stages)
      throw std::logic_error(where(rank_, a) + ": no neighbouring stage to receive from");
    const int peer = schedule_.stage_to_rank.at(peer_stage);
    typename Impl::Pending p;
    p.dev = im.take(rows_of(a.microbatch), C);
    void* buf = p.dev.data();
    if (im.path == CommPath::host_staging) {
      p.host = Kokkos::create_mirror(p.dev);  // always a separate host allocation
      buf = p.host.data();
    }
    MPI_Irecv(buf, count_of(p.dev, a), mpi_type<T>(), peer, im.tag(dir, a.stage, a.microbatch), comm_, &p.req);
    im.recvs.emplace(k, p);
  };
  // Sends the tensor produced by (dir, stage, mb) to the neighbouring stage's rank.
  auto post_send = [&](int dir, const sched::Action& a) {
    const Key out{dir, a.stage, a.microbatch};
    auto it = im.outputs.find(out);
    if (it == im.outputs.end())
      throw std::logic_error(where(rank_, a) + ": nothing to send (its compute action has not run)");
    const int peer_stage = dir == kFwd ? a.stage + 1 : a.stage - 1;
    const int peer = schedule_.stage_to_rank.at(peer_stage);
    ProfileRegion region(dir == kFwd ? "Pipeline::send_F" : "Pipeline::send_B");
    typename Impl::Pending p;
    p.dev = it->second;
    im.outputs.erase(it);
    void* buf = p.dev.data();
    // The producing kernels ran on ExecSpace: fence it before MPI reads the buffer.
    fence_space(ExecSpace(), "Pipeline::send::fence");
    if (im.path == CommPath::host_staging) {
      p.host = Kokkos::create_mirror(p.dev);
      Kokkos::deep_copy(p.host, p.dev);
      buf = p.host.data();
    }
    MPI_Isend(buf, count_of(p.dev, a), mpi_type<T>(), peer, im.tag(dir, peer_stage, a.microbatch), comm_, &p.req);
    im.sends.push_back(p);
  };
  // The input tensor of (dir, stage, mb): a completed receive or a local hand-off.
  auto input_of = [&](int dir, const sched::Action& a) -> View2<T> {
    const Key k{dir, a.stage, a.microbatch};
    auto it = im.recvs.find(k);
    if (it == im.recvs.end()) {
      // Local hand-off: the neighbouring stage lives on this rank.
      const int producer = dir == kFwd ? a.stage - 1 : a.stage + 1;
      auto ot = im.outputs.find(Key{dir, producer, a.microbatch});
      if (ot == im.outputs.end())
        throw std::logic_error(where(rank_, a) + ": its input from stage " + std::to_string(producer) +
                               " was neither received nor produced on this rank");
      View2<T> v = ot->second;
      im.outputs.erase(ot);
      return v;
    }
    typename Impl::Pending p = it->second;
    im.recvs.erase(it);
    if (p.req != MPI_REQUEST_NULL) {
      ProfileRegion r("Pipeline::wait_recv");
      const double w0 = now();
      MPI_Wait(&p.req, MPI_STATUS_IGNORE);
      st.comm_wait += now() - w0;
    }
    if (im.path == CommPath::host_staging) Kokkos::deep_copy(p.dev, p.host);
    return p.dev;
  };

  // Executes one compute action (OVERLAP_F_B runs its two parts in order).
  std::function<void(const sched::Action&)> compute = [&](const sched::Action& a) {
    if (a.op == sched::Op::OVERLAP_F_B) {
      for (const auto& sub : a.sub) compute(sub);
      return;
    }
    if (a.microbatch < 0 || a.microbatch >= schedule_.m)
      throw std::logic_error(where(rank_, a) + ": micro-batch out of range");
    Stage<T>& s = stage_of(a.stage, a);
    const MicroBatch& mb = mbs[a.microbatch];
    const std::size_t rows = rows_of(a.microbatch);
    const std::string label = std::string("Pipeline::") + sched::to_string(a);
    ProfileRegion region(label);
    // Inputs first: waiting for a boundary tensor is exposed communication, not compute.
    const bool fwd = a.op == sched::Op::F, bwd = a.op == sched::Op::B || a.op == sched::Op::I;
    if (!fwd && !bwd && a.op != sched::Op::W) throw std::logic_error(where(rank_, a) + ": not a compute action");
    View2<T> input;
    if (fwd && !s.is_first()) input = input_of(kFwd, a);
    if (bwd && !s.is_last()) input = input_of(kBwd, a);
    const double c0 = now();
    const double excluded0 = excluded_seconds;
    if (fwd) {
      View2<T> y = s.is_last() ? View2<T>() : im.take(rows, C);
      s.forward(mb, in, input, y);
      if (!s.is_last()) im.outputs[Key{kFwd, a.stage, a.microbatch}] = y;
    } else if (bwd) {
      View2<T> dx = s.is_first() ? View2<T>() : im.take(rows, C);
      s.backward_input(mb, in, input, dx);
      if (!s.is_first()) im.outputs[Key{kBwd, a.stage, a.microbatch}] = dx;
      if (a.op == sched::Op::B) s.backward_weight(mb, in);
    } else {
      s.backward_weight(mb, in);
    }
    fence_space(ExecSpace(), "Pipeline::compute::fence");
    im.give(input);
    // Dump hooks (device-to-host copies, HDF5 writes) ran inside the action: not compute.
    const double c1 = now() - (excluded_seconds - excluded0);
    st.dump_io += excluded_seconds - excluded0;
    switch (a.op) {
      case sched::Op::F:
        st.time_F += c1 - c0;
        break;
      case sched::Op::I:
        st.time_I += c1 - c0;
        break;
      case sched::Op::W:
        st.time_W += c1 - c0;
        break;
      default:
        st.time_B += c1 - c0;
        break;
    }
    st.actions.push_back({a.op, a.stage, a.microbatch, c0, c1});
    note_memory();
  };

  // Receives are posted one compute action ahead of where the schedule puts them, so the
  // transfer overlaps the compute before its consumer.
  std::size_t posted_upto = 0;
  auto post_ahead = [&](std::size_t from) {
    int computes = 0;
    std::size_t j = std::max(from, posted_upto);
    for (; j < actions.size(); ++j) {
      const auto& a = actions[j];
      if (sched::is_compute(a.op) && ++computes > 1) break;
      if (a.op == sched::Op::RECV_F) post_recv(kFwd, a);
      if (a.op == sched::Op::RECV_B) post_recv(kBwd, a);
    }
    posted_upto = std::max(posted_upto, j);
  };

  for (std::size_t i = 0; i < actions.size(); ++i) {
    const auto& a = actions[i];
    try {
      switch (a.op) {
        case sched::Op::RECV_F:
          post_recv(kFwd, a);
          break;
        case sched::Op::RECV_B:
          post_recv(kBwd, a);
          break;
        case sched::Op::SEND_F:
          post_send(kFwd, a);
          break;
        case sched::Op::SEND_B:
          post_send(kBwd, a);
          break;
        default:
          post_ahead(i + 1);
          compute(a);
          break;
      }
      im.reap_sends(false);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      std::ostringstream os;
      os << "step " << step << ", " << where(rank_, a) << ": " << e.what();
      throw std::runtime_error(os.str());
    }
  }
  {
    ProfileRegion r("Pipeline::wait_sends");
    const double w0 = now();
    im.reap_sends(true);
    st.comm_wait += now() - w0;
  }
  if (!im.recvs.empty() || !im.outputs.empty()) {
    std::ostringstream os;
    os << "step " << step << ", rank " << rank_ << ": " << im.recvs.size() << " receive(s) and " << im.outputs.size()
       << " produced tensor(s) were never consumed; the schedule's communication does not match its compute";
    throw std::runtime_error(os.str());
  }
  st.makespan = now();

  // The loss: the last stage's rank holds the per-sample sums; everyone learns them.
  const int last_rank = schedule_.stage_to_rank.back();
  MPI_Bcast(res.sample_loss.data(), batch.B, MPI_DOUBLE, last_rank, comm_);
  MPI_Bcast(res.sample_tokens.data(), batch.B, MPI_INT, last_rank, comm_);
  Fixed128 acc;
  int overflow = 0;
  for (double v : res.sample_loss) ExactSum::add(acc, v, overflow);
  if (overflow)
    throw std::runtime_error("step " + std::to_string(step) + ": loss sum overflowed the exact accumulator");
  res.loss = ExactSum::to_double(acc) / static_cast<double>(in.global_valid_tokens);

  {
    ProfileRegion r("Pipeline::optimizer");
    for (auto& s : stages_) {
      s.finalize_grads();
      if (on_grads_ready) on_grads_ready(s);
      s.optimizer_step(opt, step + 1);
      if (on_params_updated) on_params_updated(s);
    }
    fence_space(ExecSpace(), "Pipeline::optimizer::fence");
  }
  for (auto& s : stages_) s.on_loss = nullptr;
  return res;
}

template class Pipeline<float>;
template class Pipeline<double>;

}  // namespace minipipe
