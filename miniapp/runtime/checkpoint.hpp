// Checkpoints: after a complete optimizer update, every parameter and its optimizer state in
// global names (a layout independent of p, v, m, dp and schedule), with a manifest written last.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "miniapp/model/config.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/runtime/stage.hpp"

namespace minipipe {

// FNV-1a (64 bit) of a tensor's bytes, as 16 hex digits: the manifest's checksum.
std::string tensor_checksum(const void* data, std::size_t bytes);

// The datasets of one parameter: "/params/<name>", "/optimizer/m/<name>", "/optimizer/v/<name>".
std::vector<std::string> checkpoint_tensors(const std::string& param);

// Collective over `job`: writes `path` through the project's atomic writer. `stages` are this
// rank's; `writes` is true on the ranks of one data-parallel replica (each stage once).
// `completed_steps` optimizer updates are done: the data cursor and the optimizer's step count.
// `data` is DataSource::fingerprint() of the run's training data; `first_loss` the loss of the
// training's step 0 (the same on every rank), which the verdict of a restarted run compares with.
template <class T>
void write_checkpoint(MPI_Comm job, const std::string& path, bool force, const std::vector<Stage<T>>& stages,
                      bool writes, long long completed_steps, const Deck& deck, const ModelShape& shape,
                      const std::string& data, double first_loss);

// A checkpoint opened for a restart on one rank (no MPI). The constructor refuses, with an
// InputError naming the file and what is wrong, a file that is not a miniPipe checkpoint, whose
// manifest is missing, does not list exactly the tensors of the model its deck describes, or
// whose tensors do not match their checksums (a file mixing steps, or changed after it was
// written). Whether the restarting deck trains the same model is check_same_training's.
class Checkpoint {
 public:
  // `real_bytes`: sizeof the build's floating type (4, or 8 in a MINIPIPE_DOUBLE build).
  Checkpoint(const std::string& path, std::size_t real_bytes);

  const std::string& path() const { return path_; }
  long long completed_steps() const { return step_; }
  const Deck& deck() const { return deck_; }
  // The loss of the training's step 0; NaN for a checkpoint written before it was recorded.
  double first_loss() const { return first_loss_; }

  // InputError naming the first key that changes the model or the math (shape, seed, batch,
  // data, mode, optimizer and its settings) between the checkpoint's deck and `deck`, or
  // data.path when `data` (DataSource::fingerprint) is not the data the checkpoint trained on.
  void check_same_training(const Deck& deck, const std::string& data) const;

  // Parameters and optimizer state of every parameter of `stage`, by global name.
  template <class T>
  void load(std::vector<Stage<T>>& stages) const;

 private:
  std::string path_;
  long long step_ = 0;
  Deck deck_;
  std::string data_;  // the training data's fingerprint
  double first_loss_ = std::numeric_limits<double>::quiet_NaN();
  std::map<std::string, std::string> checksums_;  // dataset path -> checksum
};

}  // namespace minipipe
