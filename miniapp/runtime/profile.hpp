// Profiling: each model part's F, I and W time and stored bytes (embedding and head as their own
// parts) under every recompute mode, and the boundary transfer, measured into a cost file.
#pragma once

#include <mpi.h>

#include "miniapp/model/config.hpp"
#include "miniapp/model/cost_file.hpp"

namespace minipipe {

// Collective over `comm`. Ranks 0 and 1 time boundary-sized ping-pongs (latency + bandwidth
// fit; one rank: none measured, transfers cost 0); then rank 0 (every rank at once when
// `concurrent`) runs every part as its own stage for each micro-batch size B/m (m a divisor of
// train.batch) in steps of m micro-batches as the trainer runs them (shared packed weights and
// held-back dW samples included): per recompute mode, `repeat` rounds after a warm-up, each one
// step of every size; it keeps the median over rounds of each part's mean time per micro-batch
// (the least over ranks), the last W's extra (W_tail) and each part's per-step fixed cost. No
// calibration (see calibrate_costs in miniapp/tuning/calibrate.hpp). The same result on every rank.
CostFile profile_costs(const Deck& deck, MPI_Comm comm, int repeat, bool concurrent = false);

}  // namespace minipipe
