// Training data: the built-in deterministic synthetic corpus and token files in HDF5.
// A sample depends on (seed, global sample index) only, so every layout sees the same batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "miniapp/model/config.hpp"
#include "miniapp/model/model.hpp"

namespace minipipe {

// One global batch: tokens and targets [B,T] row-major; target -1 marks padding.
struct Batch {
  int B = 0, T = 0;
  std::vector<int> tokens, targets;
  long long valid_tokens() const;
};

class DataSource {
 public:
  // Validates data.* keys; for data.source = hdf5 reads the token file (InputError on a bad file).
  DataSource(const Deck& deck, const ModelShape& shape);
  // The global batch of optimizer step `step` (0-based).
  Batch batch(int step, int B) const;
  // What the batches are made from, for a checkpoint to record and a restart to compare:
  // "synthetic" (seed and min_len are deck keys), or the token file's shape and FNV-1a checksum.
  std::string fingerprint() const;
  // InputError naming data.path when the global batch of some step in [first_step, steps) has
  // no valid target (all -1): its loss would be 0/0 and the run would stop there. The batches of
  // a token file repeat with a period of at most its row count, so this reads each row once.
  void check_every_batch_has_targets(long long first_step, long long steps, long long B, const std::string& path,
                                     const std::string& dataset) const;

 private:
  ModelShape shape_;
  std::uint64_t seed_ = 0;
  int min_len_ = 0;
  bool from_file_ = false;
  std::vector<int> file_tokens_;  // [rows, T+1]
  std::uint64_t file_rows_ = 0;
};

}  // namespace minipipe
