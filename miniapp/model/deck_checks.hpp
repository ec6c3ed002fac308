// Deck checks that look across keys or at the file system before a run starts: keys that have no
// effect in the chosen configuration, pipeline.timeout, and every input and output path.
#pragma once

#include <string>
#include <vector>

#include "miniapp/io/output_paths.hpp"
#include "miniapp/model/config.hpp"
#include "miniapp/model/model.hpp"

namespace minipipe {

// pipeline.timeout in seconds (0 = wait forever); InputError unless finite and in [0, 1e6].
double pipeline_timeout(const Deck& deck);

// InputError for a key set away from its default where the configuration ignores it, e.g.
// pipeline.csv or pipeline.placement while no schedule is "csv", data.path while data.source is
// synthetic, train.momentum with adamw, AdamW's beta1/beta2/eps with sgd, output.dump_level
// without output.dump, checkpoint.every without checkpoint.path, output.verify without a dump.
// Also checks pipeline.placement's value (loop | v) whatever the schedule.
void check_effective_keys(const Deck& deck);

// File names of a sweep (more than one (schedule, m) pair): the dump gets "_<schedule>_m<M>.h5",
// SVG and trace files "_<schedule>_m<M>" before their extension (`ext` when they have none).
std::string sweep_dump_name(const std::string& path, const std::string& schedule, long long m);
std::string sweep_file_name(const std::string& path, const std::string& tag, const std::string& ext);
// The time budget's picture beside an SVG timeline: "_budget" before the extension.
std::string budget_svg_path(const std::string& svg_path);

// Every file the run will write, with its key, under the names the sweep gives it.
std::vector<io::OutputSpec> planned_outputs(const Deck& deck);
// Every file the run will read: the deck itself (`deck_path`, may be empty), pipeline.csv when
// a schedule is csv, data.path when data.source is hdf5, pipeline.costs with an automatic split,
// checkpoint.restart and output.verify.
std::vector<io::InputSpec> planned_inputs(const Deck& deck, const std::string& deck_path);

// check_input_file on every input, then io::check_outputs(planned_outputs, planned_inputs).
// Throws io::PathError (bad input, exit 2).
void check_run_files(const Deck& deck, const std::string& deck_path);

// Bytes a dump of `steps` steps at `level` ("loss", "grads", "full", "kernels") holds, from the
// model shape and batch alone: every dataset's elements times its element size (`real_bytes` for
// floats), plus an allowance per dataset for HDF5's object headers. `level` "none" is 0.
double estimated_dump_bytes(const ModelShape& shape, long long batch, long long steps, const std::string& level,
                            std::size_t real_bytes);

// Bytes of a checkpoint: every parameter with its two AdamW moments, plus headers.
double estimated_checkpoint_bytes(const ModelShape& shape, std::size_t real_bytes);

// InputError naming the first output of a file system when the dumps of the launch (one per sweep entry, each of
// train.steps - `first_step` steps) and the checkpoint (twice its size while it is replaced)
// do not fit in the free space of their file systems: a run that fills the disk loses its steps.
void check_output_space(const Deck& deck, const ModelShape& shape, long long first_step, std::size_t real_bytes);

}  // namespace minipipe
