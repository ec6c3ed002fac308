// Text for tools and people, shared by every report writer of the project: JSON strings and
// numbers, and numbers that read back as the same double.
#pragma once

#include <string>
#include <vector>

namespace minipipe::sched {

// A JSON string literal: quotes, backslashes and control bytes escaped.
std::string json_quote(const std::string& text);
// 17 significant digits (reads back as the same double); JSON null when not finite.
std::string json_number(double x);
// A JSON array of json_number()s.
std::string json_array(const std::vector<double>& v);
// 17 significant digits, for messages that must show a value exactly ("1e-09", not "0.000000").
std::string exact_text(double x);

}  // namespace minipipe::sched
