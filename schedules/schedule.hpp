// A pipeline schedule as data: for each of p ranks, the ordered list of actions it runs.
// Stages are global (p*v of them) with an explicit stage-to-rank map; generators build one.
#pragma once

#include <string>
#include <vector>

#include "schedules/action.hpp"

namespace minipipe::sched {

// loop: stage s on rank s % p (Megatron's interleaving). v: chunk c runs down the ranks
// when c is even and back up when c is odd, so rank r holds stages r and 2p-1-r for v = 2
// (ZB-V, DualPipeV) and the last stage sits on rank 0 next to the first.
// inferred: only for CSV import, where the file itself says which rank runs each stage.
enum class Placement { loop, v, inferred };

const char* placement_name(Placement pl);            // "loop", "v", "inferred"
Placement parse_placement(const std::string& text);  // throws ScheduleError naming the allowed

std::vector<int> looped_placement(int p, int v);
std::vector<int> v_placement(int p, int v);

struct Schedule {
  std::string name;                        // generator name, or "csv:<source>" for an imported schedule
  int p = 0;                               // ranks
  int v = 1;                               // stages (model chunks) per rank
  int m = 0;                               // micro-batches per optimizer step
  std::vector<int> stage_to_rank;          // size p*v
  std::vector<std::vector<Action>> ranks;  // per rank, in execution order
  int group = 0;                           // interleaved-1f1b: micro-batches per group (else 0)
  // Copies of the model the micro-batches flow through (DualPipe: 2, fed from both ends). Chain c
  // is stages c*L .. c*L+L-1 with L = chain_length() (the model's parts in order); micro-batch mb
  // runs through chain mb % chains only. 1: one copy, stage 0 first and stage p*v-1 last.
  int chains = 1;

  int num_stages() const { return p * v; }
  int chain_length() const { return num_stages() / chains; }       // model parts
  int part_of(int stage) const { return stage % chain_length(); }  // which part of the model
  int chain_of_stage(int stage) const { return stage / chain_length(); }
  int chain_of_microbatch(int mb) const { return mb % chains; }
  bool runs(int stage, int mb) const { return chain_of_stage(stage) == chain_of_microbatch(mb); }
  bool is_first_stage(int stage) const { return part_of(stage) == 0; }                  // embeds the tokens
  bool is_last_stage(int stage) const { return part_of(stage) == chain_length() - 1; }  // the loss
  bool uses_split_backward() const;                 // any I or W (also inside OVERLAP_F_B)
  bool is_lowered() const;                          // holds SEND/RECV actions
  bool uses_overlap() const;                        // any OVERLAP_F_B
  std::vector<int> stages_of_rank(int rank) const;  // ascending
  std::size_t num_actions() const;
};

// Every variant's name, in the order of the variant table (schedules/variant_table.cpp, one row a
// variant, its generator under schedules/variants/). Names are the same everywhere (CLI, decks,
// reports).
std::vector<std::string> schedule_names();

// One line per variant: placement, allowed v and m, and why. Throws for an unknown name.
std::string constraints(const std::string& name);

// The v a variant uses when none is given: 2 for the multi-chunk variants, else 1.
int default_v(const std::string& name);

// Copies of the model a variant's micro-batches flow through (its schedules' chains): 2 for
// dualpipe, else 1. Its p*v stages are then that many copies of p*v/copies model parts.
int model_copies(const std::string& name);

// Knobs some variants take; 0 means the variant's default.
struct ScheduleOptions {
  int group = 0;       // interleaved-1f1b: micro-batches per group through the chunks (0 = p)
  int memory_cap = 0;  // zb-mem: stored micro-batches per rank (0 = p, 1F1B's)
  // Costs the list-scheduled variants (v-half, v-min, zb-mem) plan with, per stage or one for
  // all (empty = 1 each, F = I = W); comm = latency of a transfer between ranks.
  std::vector<double> F, I, W;
  double comm = 0;
};

// Throws ScheduleError (key, value, what is allowed) unless make_schedule(name, p, m, v, opt)
// is allowed; v = 0 means default_v(name). Cheap: a caller sizes nothing by p, v or m before it.
void check_schedule(const std::string& name, int p, int m, int v, const ScheduleOptions& opt = {});

// Builds the compute-only schedule (no SEND/RECV; see lower_communication). v = 0 means
// default_v(name). Throws ScheduleError naming the key, its value and what is allowed.
Schedule make_schedule(const std::string& name, int p, int m, int v = 0, const ScheduleOptions& opt = {});

}  // namespace minipipe::sched
