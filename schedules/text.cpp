// The project's JSON writer: the layout is ours, escaping and numbers are nlohmann-json's.
#include "schedules/text.hpp"

namespace minipipe::sched {

namespace {

std::string scalar_text(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// One line when no member is an object and every array member is itself one line.
bool holds_no_object(const Json& v) {
  for (const auto& item : v) {
    if (item.is_object() && !item.empty()) return false;
    if (item.is_array() && !holds_no_object(item)) return false;
  }
  return true;
}

void put(const Json& v, int depth, int inline_depth, std::string& out) {
  if (!v.is_structured() || v.empty()) {
    out += v.is_structured() ? (v.is_object() ? "{}" : "[]") : scalar_text(v);
    return;
  }
  const bool one_line = holds_no_object(v) || (inline_depth >= 0 && depth >= inline_depth);
  const std::string pad = one_line ? "" : "\n" + std::string(2 * (depth + 1), ' ');
  out += v.is_object() ? '{' : '[';
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += first ? pad : (one_line ? ", " : "," + pad);
    first = false;
    if (v.is_object()) out += scalar_text(Json(it.key())) + ": ";
    put(it.value(), depth + 1, inline_depth, out);
  }
  if (!one_line) out += "\n" + std::string(2 * depth, ' ');
  out += v.is_object() ? '}' : ']';
}

}  // namespace

std::string json_text(const Json& value, int inline_depth) {
  std::string out;
  put(value, 0, inline_depth, out);
  return out;
}

}  // namespace minipipe::sched
