// JSON for tools, shared by every report writer of the project: nlohmann-json values laid out for
// reading and grepping. Host-only: include it only from host-only libraries (minipipe_schedules,
// minipipe_host), so no device compiler parses nlohmann-json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace minipipe::sched {

// A JSON document whose keys keep the order they were added in.
using Json = nlohmann::ordered_json;

// The one JSON writer of the project. Strings are escaped by nlohmann-json, invalid UTF-8 is
// replaced by U+FFFD (error_handler_t::replace), so the text is valid JSON whatever the input
// strings hold; numbers are nlohmann's shortest form that reads back as the same double; a NaN or
// infinity is null. Layout: a container holding no object (directly or in an array) is written on
// one line ({"a": 1, "b": [2, 3]}), as is every container at depth >= inline_depth (when >= 0);
// the others put one member per line, indented by two spaces per level. No trailing newline.
std::string json_text(const Json& value, int inline_depth = -1);

}  // namespace minipipe::sched
