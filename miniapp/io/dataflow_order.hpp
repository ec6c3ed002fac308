// Where a dump dataset comes from: its place in the order the computation made it (docs/design.md §5,
// the dataflow order) and the kernel that produced it, so `minipipe compare` can name the first
// divergence. Works from the dataset path alone (block-level and kernel-level dumps alike).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace minipipe::io {

struct DatasetOrigin {
  // Sort key: group (-1 = /init, N = step N, then paths outside both), position in the group's
  // dataflow order (unknown names after the known ones), then the path itself.
  std::int64_t group = 0;
  std::int64_t position = 0;
  std::string path;
  bool known = false;      // a name of the dump contract
  std::string kernel;      // the kernel label ("Linear::forward (qkv_w)"), "?" when unknown
  std::string step;        // "0", "1", ... or "-" (init parameters, paths outside a step)
  std::string layer;       // layer_NN, head, embedding or "-"
  std::string short_path;  // the path without its leading '/'

  bool operator<(const DatasetOrigin& o) const {
    return std::tie(group, position, path) < std::tie(o.group, o.position, o.path);
  }
};

// `optimizer_update` labels the updated parameters (e.g. "AdamW::update"); the dump's deck says
// which optimizer ran (see optimizer_update_label).
DatasetOrigin dataset_origin(const std::string& path, const std::string& optimizer_update = "AdamW::update");

// The optimizer kernel's label from the deck text stored in /meta (`optimizer = "sgd"` gives
// "Sgd::update"; anything else, the default AdamW, gives "AdamW::update").
std::string optimizer_update_label(const std::string& deck_text);

}  // namespace minipipe::io
