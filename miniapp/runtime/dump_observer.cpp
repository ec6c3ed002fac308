// Dump observer: datasets are created by every rank alike (HDF5 metadata is collective) and
// written by the rank that holds the rows; device tensors are fenced and copied to the host first.
#include "miniapp/runtime/dump_observer.hpp"

#include <cstdio>
#include <cstring>

#include "miniapp/model/kernel_outputs.hpp"

namespace minipipe {

namespace {

template <class T>
io::DType dtype() {
  return sizeof(T) == 4 ? io::DType::f32 : io::DType::f64;
}

std::vector<std::uint64_t> dims_of(const ParamSpec& p) {
  std::vector<std::uint64_t> d;
  for (int x : p.shape) d.push_back(static_cast<std::uint64_t>(x));
  return d;
}

}  // namespace

std::string step_group(int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "/step_%04d", step);
  return name;
}

template <class T>
DumpObserver<T>::DumpObserver(io::DumpWriter& writer, io::DumpLevel level, const ModelShape& shape, int batch,
                              bool writes_params)
    : w_(writer), level_(level), shape_(shape), batch_(batch), writes_params_(writes_params) {}

template <class T>
void DumpObserver<T>::create_param_sets(const std::string& group) {
  for (const auto& p : all_params(shape_)) w_.create_dataset(group + "/" + p.name, dims_of(p), dtype<T>());
}

template <class T>
void DumpObserver<T>::write_params(const std::string& group, const Stage<T>& stage, bool grads) {
  if (!writes_params_ || stage.copy() != 0) return;  // another copy holds the same parameters
  for (const auto& p : stage.params()) {
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), grads ? p.grad : p.value);
    w_.write_rows(group + "/" + p.spec.name, 0, dims_of(p.spec)[0], h.data());
  }
}

template <class T>
void DumpObserver<T>::write_initial(const std::vector<Stage<T>>& stages) {
  if (level_ < io::DumpLevel::grads) return;
  create_param_sets("/init/params");
  for (const auto& s : stages) write_params("/init/params", s, false);
}

template <class T>
void DumpObserver<T>::begin_step(int step) {
  group_ = step_group(step);
  const std::uint64_t B = static_cast<std::uint64_t>(batch_), Tl = shape_.seq_len, C = shape_.channels;
  w_.create_dataset(group_ + "/tokens", {B, Tl}, io::DType::i32);
  w_.create_dataset(group_ + "/targets", {B, Tl}, io::DType::i32);
  w_.create_dataset(group_ + "/loss", {}, io::DType::f64);
  w_.create_dataset(group_ + "/per_sample_loss_sum", {B}, io::DType::f64);
  w_.create_dataset(group_ + "/per_sample_tokens", {B}, io::DType::i32);
  if (level_ >= io::DumpLevel::full) {
    w_.create_dataset(group_ + "/activations/embedding", {B, Tl, C}, dtype<T>());
    for (int l = 0; l < shape_.n_layer; ++l) {
      w_.create_dataset(group_ + "/activations/" + block_name(l), {B, Tl, C}, dtype<T>());
      w_.create_dataset(group_ + "/input_grads/" + block_name(l), {B, Tl, C}, dtype<T>());
    }
    w_.create_dataset(group_ + "/activations/lnf", {B, Tl, C}, dtype<T>());
    w_.create_dataset(group_ + "/input_grads/lnf", {B, Tl, C}, dtype<T>());
  }
  if (level_ >= io::DumpLevel::kernels) {  // every kernel output of docs/design.md §5, blocks then head
    auto create = [&](const std::string& part, const std::vector<KernelOutput>& list) {
      for (const auto& k : list)
        w_.create_dataset(group_ + "/kernels/" + part + "/" + k.name, k.dims(shape_, batch_), dtype<T>());
    };
    for (int l = 0; l < shape_.n_layer; ++l) {
      create(block_name(l), block_forward_outputs());
      create(block_name(l), block_backward_outputs());
    }
    create("head", head_forward_outputs());
    create("head", head_backward_outputs());
  }
  if (level_ >= io::DumpLevel::grads) {
    create_param_sets(group_ + "/grads");
    create_param_sets(group_ + "/params");
  }
}

template <class T>
void DumpObserver<T>::end_step(const Batch& batch, const StepResult& result, bool write_batch, bool write_loss) {
  const std::uint64_t B = static_cast<std::uint64_t>(batch_);
  if (write_batch) {
    w_.write_rows(group_ + "/tokens", 0, B, batch.tokens.data());
    w_.write_rows(group_ + "/targets", 0, B, batch.targets.data());
  }
  if (write_loss) {
    w_.write_rows(group_ + "/loss", 0, 1, &result.loss);
    w_.write_rows(group_ + "/per_sample_loss_sum", 0, B, result.sample_loss.data());
    w_.write_rows(group_ + "/per_sample_tokens", 0, B, result.sample_tokens.data());
  }
}

template <class T>
void DumpObserver<T>::write_tensor(const std::string& path, const MicroBatch& mb, CMat<T> x) {
  fence_space(ExecSpace(), "Dump::fence");
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
  w_.write_rows(path, static_cast<std::uint64_t>(mb.sample0), static_cast<std::uint64_t>(mb.nsamples), h.data());
}

template <class T>
void DumpObserver<T>::activation(const std::string& layer, const MicroBatch& mb, CMat<T> x) {
  if (level_ >= io::DumpLevel::full) write_tensor(group_ + "/activations/" + layer, mb, x);
}

template <class T>
void DumpObserver<T>::input_grad(const std::string& layer, const MicroBatch& mb, CMat<T> dx) {
  if (level_ >= io::DumpLevel::full) write_tensor(group_ + "/input_grads/" + layer, mb, dx);
}

template <class T>
void DumpObserver<T>::kernel_output(const std::string& layer, const char* name, const MicroBatch& mb, CMat<T> x) {
  if (level_ < io::DumpLevel::kernels) return;
  const std::string path = group_ + "/kernels/" + layer + "/" + name;
  if (std::strcmp(name, "att") != 0) {
    write_tensor(path, mb, x);
    return;
  }
  // Attention probabilities (n*H*T, T): the entries above the diagonal are written as 0, whatever
  // a kernel path leaves there.
  fence_space(ExecSpace(), "Dump::fence");
  Kokkos::View<T**, Kokkos::LayoutRight, HostSpace> h("Dump::att", x.extent(0), x.extent(1));  // a copy to edit
  Kokkos::deep_copy(h, x);
  const std::size_t Tl = h.extent(1);
  for (std::size_t r = 0; r < h.extent(0); ++r)
    for (std::size_t t2 = r % Tl + 1; t2 < Tl; ++t2) h(r, t2) = T(0);
  w_.write_rows(path, static_cast<std::uint64_t>(mb.sample0), static_cast<std::uint64_t>(mb.nsamples), h.data());
}

template <class T>
void DumpObserver<T>::grads_ready(const Stage<T>& stage) {
  if (level_ >= io::DumpLevel::grads) write_params(group_ + "/grads", stage, true);
}

template <class T>
void DumpObserver<T>::params_updated(const Stage<T>& stage) {
  if (level_ >= io::DumpLevel::grads) write_params(group_ + "/params", stage, false);
}

template class DumpObserver<float>;
template class DumpObserver<double>;

}  // namespace minipipe
