// Trainer: a step is zero gradients, execute the rank's actions, agree on the loss, finalize
// gradients and update parameters; observers see the gradients and the new parameters.
#include "trainer.hpp"

#include <stdexcept>

#include "kernels/cross_entropy.hpp"

namespace minipipe {

std::vector<MicroBatch> split_batch(int B, int m) {
  if (m < 1 || m > B)
    throw std::invalid_argument("split_batch: " + std::to_string(m) + " micro-batches of a batch of " +
                                std::to_string(B) + "; need 1 <= m <= B");
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
Trainer<T>::Trainer(MPI_Comm comm, const ModelShape& shape, const StageLayout& layout, const sched::Schedule& plan,
                    Mode mode, std::uint64_t seed, CommPath path, const OptimizerConfig& opt)
    : comm_(comm), shape_(shape), plan_(plan), opt_(opt) {
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  for (int s = 0; s < plan_.num_stages(); ++s)
    if (plan_.stage_to_rank.at(static_cast<std::size_t>(s)) == rank) stages_.emplace_back(shape, layout, s, mode, seed);
  executor_ = std::make_unique<Executor<T>>(comm_, plan_, stages_, path, shape.seq_len, shape.channels);
}

template <class T>
Trainer<T>::~Trainer() = default;

template <class T>
StepResult Trainer<T>::step(int step, const Batch& batch, StepObserver<T>* observer) {
  const auto mbs = split_batch(batch.B, plan_.m);
  StepResult res;
  res.sample_loss.assign(static_cast<std::size_t>(batch.B), 0.0);
  res.sample_tokens.assign(static_cast<std::size_t>(batch.B), 0);
  upload(step, batch);
  in_.sample_loss = res.sample_loss.data();
  in_.sample_tokens = res.sample_tokens.data();
  for (auto& s : stages_) s.zero_grads();
  res.stats = executor_->run(step, mbs, in_, observer);
  in_.sample_loss = nullptr, in_.sample_tokens = nullptr;
  gather_loss(step, res);
  update(step, observer);
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
  using HostInts = Kokkos::View<const int*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Kokkos::deep_copy(in_.tokens, HostInts(batch.tokens.data(), n));
  Kokkos::deep_copy(in_.targets, HostInts(batch.targets.data(), n));
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
  MPI_Bcast(res.sample_loss.data(), B, MPI_DOUBLE, last_rank, comm_);
  MPI_Bcast(res.sample_tokens.data(), B, MPI_INT, last_rank, comm_);
  try {
    res.loss = global_loss(res.sample_loss, res.sample_tokens);
  } catch (const std::exception& e) {
    throw std::runtime_error("step " + std::to_string(step) + ": " + e.what());
  }
}

template <class T>
void Trainer<T>::update(int step, StepObserver<T>* observer) {
  ProfileRegion r("Pipeline::optimizer");
  for (auto& s : stages_) {
    s.finalize_grads();
    if (observer) observer->grads_ready(s);
    s.optimizer_step(opt_, step + 1);
    if (observer) observer->params_updated(s);
  }
  fence_space(ExecSpace(), "Pipeline::optimizer::fence");
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace minipipe
