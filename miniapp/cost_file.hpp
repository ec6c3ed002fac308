// The measured cost file of `minipipe profile`: per micro-batch size, each model part's F, I, W
// time and stored bytes under every recompute mode, and the boundary transfer's latency/bandwidth.
#pragma once

#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "model.hpp"
#include "schedules/simulator.hpp"

namespace minipipe {

// One part (embedding, one block, head) on one micro-batch: times in ms, bytes it stores.
struct PartCost {
  double F = 0, I = 0, W = 0;
  double kept_bytes = 0;  // what F keeps until W
  double work_bytes = 0;  // what I adds (remade values, gradients) until W
};

// Costs of micro-batches of `samples` sequences: parts[0] = embedding, parts[1..L] = blocks,
// parts[L+1] = head (final LayerNorm, LM head, loss); each indexed by Recompute.
struct SizeCosts {
  int samples = 0;
  std::vector<std::array<PartCost, 3>> parts;
};

struct CostFile {
  ModelShape shape;
  int batch = 0, real_bytes = 4;
  std::string backend, mode, comm_path;
  bool transfer_measured = false;
  double latency_ms = 0, ms_per_byte = 0;  // one boundary transfer: latency + bytes * ms_per_byte
  std::vector<SizeCosts> sizes;            // ascending samples

  // The entry for micro-batches of `samples` (the nearest measured size, scaled linearly).
  SizeCosts at(int samples) const;
  // Time of one boundary transfer of a micro-batch of `samples` sequences (ms).
  double transfer_ms(int samples) const;
  // Refuses (InputError naming the file and the key) a file measured on another model shape.
  void check_shape(const ModelShape& s, const std::string& origin) const;
};

const char* part_name(int part, int n_layer);  // "embedding", "layer_03", "head" (static storage for blocks)

// The per-stage cost model of a split (stage s: embedding if s = 0, blocks [first, first+count),
// head if last): F, I, W, B per stage in ms, act = kept bytes, act_work = I -> W bytes.
sched::CostModel stage_costs(const CostFile& costs, const StageLayout& layout, int samples, Recompute r);
// Per-layer F+I+W (ms) of the blocks, and the embedding's and head's, for the split optimizer.
struct LayerTimes {
  std::vector<double> blocks;
  double embedding = 0, head = 0;
};
LayerTimes layer_times(const CostFile& costs, int samples, Recompute r);

void write_cost_file(const CostFile& c, std::ostream& out);
// Reads a cost file; InputError naming the file, the key and what is expected.
CostFile read_cost_file(const std::string& path);

}  // namespace minipipe
