// The HDF5 dump of a run as a step observer: it creates each step's datasets (collectively) and
// writes the rows this rank owns, in global names and global sample order (layout of docs/design.md §5).
#pragma once

#include <string>

#include "miniapp/io/dump_writer.hpp"
#include "miniapp/runtime/trainer.hpp"

namespace minipipe {

// "/step_0003": the dump group of a (0-based) step.
std::string step_group(int step);

template <class T>
class DumpObserver final : public StepObserver<T> {
 public:
  // `writes_params`: this rank writes its stages' parameters and gradients (one data-parallel
  // replica does; the others hold the same values).
  DumpObserver(io::DumpWriter& writer, io::DumpLevel level, const ModelShape& shape, int batch, bool writes_params);

  // /init/params: every parameter before the first step (collective; local stages write).
  void write_initial(const std::vector<Stage<T>>& stages);
  // Creates the step's datasets (collective); the step's tensors then arrive as observed.
  void begin_step(int step);
  // Tokens and targets (when this rank writes them) and the loss (the last stage's rank).
  void end_step(const Batch& batch, const StepResult& result, bool write_batch, bool write_loss);

  void activation(const std::string& layer, const MicroBatch& mb, CMat<T> x) override;
  void input_grad(const std::string& layer, const MicroBatch& mb, CMat<T> dx) override;
  void kernel_output(const std::string& layer, const char* name, const MicroBatch& mb, CMat<T> x) override;
  bool wants_kernel_outputs() const override { return level_ >= io::DumpLevel::kernels; }
  void grads_ready(const Stage<T>& stage) override;
  void params_updated(const Stage<T>& stage) override;

 private:
  void create_param_sets(const std::string& group);
  void write_params(const std::string& group, const Stage<T>& stage, bool grads);
  void write_tensor(const std::string& path, const MicroBatch& mb, CMat<T> x);

  io::DumpWriter& w_;
  io::DumpLevel level_;
  ModelShape shape_;
  int batch_;
  bool writes_params_;
  std::string group_;  // "/step_NNNN" of the step being observed
};

}  // namespace minipipe
