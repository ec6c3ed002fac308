// The measured cost file of `minipipe profile`: per micro-batch size, each model part's F, I, W
// time and stored bytes under every recompute mode, each part's per-step fixed cost, the boundary
// transfer's latency/bandwidth, and the slowdown a short real pipeline run measured.
#pragma once

#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "miniapp/model/model.hpp"
#include "schedules/simulator.hpp"

namespace minipipe {

// One part (embedding, one block, head) on one micro-batch: times in ms, bytes it stores.
struct PartCost {
  double F = 0, I = 0, W = 0;  // W: one that is not its step's last
  double kept_bytes = 0;       // what F keeps until W
  double work_bytes = 0;       // what I adds (remade values, gradients) until W
  double W_tail = 0;           // what the step's last W costs beyond W (held-back dW samples added)
};

// Costs of micro-batches of `samples` sequences: parts[0] = embedding, parts[1..L] = blocks,
// parts[L+1] = head (final LayerNorm, LM head, loss); each indexed by Recompute.
struct SizeCosts {
  int samples = 0;
  std::vector<std::array<PartCost, 3>> parts;
};

// What a short real pipeline run (the reference configuration) measured against the profile.
// slowdown = the run's compute time (F/I/W/B of every rank, steps after the first) over what the
// profiled part costs predict for the same actions: on a machine shared with other work a step
// gets the average CPU share over many scheduler slices, while the profile keeps each part's
// least (undisturbed) time; 1 on a dedicated machine. Every predicted compute time is scaled by it.
struct Calibration {
  bool measured = false;
  int ranks = 0, m = 0, runs = 0;  // the reference run: p, m, launches of 2 steps
  std::string config;              // "1f1b p=2 v=1 m=8 split 4/4 recompute none"
  double slowdown = 1.0;
  // Per compute action, the time rank 0 (which runs a 1F1B step's first and last action) spent
  // neither computing nor waiting for a peer, over its compute actions (ms); the simulator adds it.
  double action_overhead_ms = 0;
  // The reference's measured step minus its makespan (loss agreement, finalize, update, zeroing,
  // upload, the step's barriers) over the profiled fixed cost of its slowest rank.
  double fixed_slowdown = 1.0;
  // The reference's compute actions' spread about their kind-and-stage mean (RunReport::action_cv,
  // the W that added held-back dW samples left out):
  // the simulator draws action times with it (sched::CostModel::jitter_cv).
  double action_cv = 0;
  double measured_step_ms = 0, measured_makespan_ms = 0;    // medians of the steps after the first
  double predicted_step_ms = 0, predicted_makespan_ms = 0;  // the model (slowdown included)
};

struct CostFile {
  ModelShape shape;
  int batch = 0, real_bytes = 4;
  int profiled_ranks = 1;  // ranks that ran every part at the same time (the run's concurrency)
  std::string backend, mode, comm_path;
  bool transfer_measured = false;
  double latency_ms = 0, ms_per_byte = 0;  // one boundary transfer: latency + bytes * ms_per_byte
  std::vector<SizeCosts> sizes;            // ascending samples
  // Per part (embedding, blocks, head), ms once per step whatever m: zeroing the gradients,
  // finalizing them and the optimizer update (the trainer's work around the pipeline).
  std::vector<double> step_fixed_ms;
  Calibration calibration;

  // The entry for micro-batches of `samples` (the nearest measured size, scaled linearly).
  SizeCosts at(int samples) const;
  // Time of one boundary transfer of a micro-batch of `samples` sequences (ms).
  double transfer_ms(int samples) const;
  // Refuses (InputError naming the file and the key) a file measured on another model shape.
  void check_shape(const ModelShape& s, const std::string& origin) const;
  // Refuses (InputError naming the file, the key and both values) a file profiled in another
  // train.mode or on another Kokkos backend: its times describe other kernels.
  void check_setting(const std::string& train_mode, const std::string& exec_backend, const std::string& origin) const;
};

// One line on what the calibration measured (or that there is none), for the tools' output.
std::string calibration_text(const Calibration& k);

const char* part_name(int part, int n_layer);  // "embedding", "layer_03", "head" (static storage for blocks)

// The per-stage cost model of a split (stage s: embedding if s = 0, blocks [first, first+count),
// head if last): F, I, W, B per stage in ms, act = kept bytes, act_work = I -> W bytes.
// Times are the profiled ones times the calibration's slowdown.
sched::CostModel stage_costs(const CostFile& costs, const StageLayout& layout, int samples, Recompute r);
// Per rank (stage s on rank stage_to_rank[s]): the step's fixed cost of its parts (ms, the
// calibration's fixed_slowdown included). A step = the zeroing, the pipeline, the loss agreement, finalize and the
// update, and the ranks meet between them, so its fixed part is the slowest rank's.
std::vector<double> rank_fixed_ms(const CostFile& costs, const StageLayout& layout,
                                  const std::vector<int>& stage_to_rank, int p);
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
