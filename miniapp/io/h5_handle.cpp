// Internal to miniapp/io: turns the HDF5 error stack into text for exception messages.
// The deepest entries name the actual cause; the outer ones only repeat "unable to ...".
#include "miniapp/io/h5_handle.hpp"

#include <vector>

namespace minipipe::io::detail {

namespace {
herr_t collect_desc(unsigned /*n*/, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::vector<std::string>*>(client);
  if (err != nullptr && err->desc != nullptr && err->desc[0] != '\0') out->emplace_back(err->desc);
  return 0;
}
}  // namespace

std::string h5_error_text() {
  std::vector<std::string> descs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_desc, &descs);
  H5Eclear2(H5E_DEFAULT);
  // Downward walk: API call first, innermost cause last. Two innermost entries are enough to
  // say what failed and why without repeating every layer of the library.
  std::string text;
  const std::size_t first = descs.size() > 2 ? descs.size() - 2 : 0;
  for (std::size_t i = descs.size(); i-- > first;) {
    if (!text.empty()) text += "; ";
    text += descs[i];
  }
  return text;
}

}  // namespace minipipe::io::detail
