// Internal to miniapp/io: turns the HDF5 error stack into text for exception messages.
// The deepest entries name the actual cause; the outer ones only repeat "unable to ...".
#include "miniapp/io/h5_handle.hpp"

#include <string>
#include <vector>

namespace minipipe::io::detail {

namespace {
herr_t collect_desc(unsigned /*n*/, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::vector<std::string>*>(client);
  if (err != nullptr && err->desc != nullptr && err->desc[0] != '\0') out->emplace_back(err->desc);
  return 0;
}

// The file driver's description of a failed system call is a dump of its state ("file write
// failed: time = ..., filename = ..., file descriptor = 19, errno = 28, error message = 'No space
// left on device', buf = 0x..., ..."): keep what failed and the OS's reason only.
std::string os_reason(const std::string& desc) {
  const std::string key = "error message = '";
  const auto at = desc.find(key);
  if (at == std::string::npos) return desc;
  const auto end = desc.find('\'', at + key.size());
  const std::string reason =
      desc.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
  const auto colon = desc.find(':');
  return (colon == std::string::npos || colon > at ? std::string("system call failed") : desc.substr(0, colon)) + ": " +
         reason;
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
    text += os_reason(descs[i]);
  }
  return text;
}

}  // namespace minipipe::io::detail
