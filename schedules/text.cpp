// JSON quoting and exact number text: the one implementation behind every report, timeline
// and message that prints a string or a double for a reader to parse.
#include "schedules/text.hpp"

#include <cmath>
#include <cstdio>

namespace minipipe::sched {

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string exact_text(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string json_number(double x) {
  return std::isfinite(x) ? exact_text(x) : "null";
}

std::string json_array(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + json_number(v[k]);
  return out + "]";
}

}  // namespace minipipe::sched
