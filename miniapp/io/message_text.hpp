// How user-supplied text and numbers appear in error messages: strings quoted with every
// non-printable byte escaped, numbers in the shortest form that reads back as the same value.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>

namespace minipipe {

// "'" + s + "'" with backslash, quote, control and non-ASCII bytes escaped (\n, \t, \xNN), so a
// value with a newline or a terminal escape cannot forge or hide part of the message.
inline std::string quoted_text(const std::string& s) {
  std::string o = "'";
  for (unsigned char c : s) {
    if (c == '\\' || c == '\'') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c == '\r') {
      o += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      char b[5];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "'";
}

// An error message as printed: control bytes (other than the newline and tab of a multi-line
// message) and DEL escaped as \xNN, so a value echoed from a command line, a deck or a file cannot
// move the cursor, recolour the terminal or hide part of the line. Other bytes (UTF-8) are kept.
inline std::string escaped_controls(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char b[5];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

// The shortest decimal text that reads back as the same double (0.1, not 0.10000000000000001);
// nan, inf and -inf spelled out.
inline std::string compact_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // Whole numbers as integers: 1000000, not 1e+06.
  if (x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<long long>(x));
  for (int prec = 1; prec <= 17; ++prec) {
    std::ostringstream os;
    os << std::setprecision(prec) << x;
    if (std::strtod(os.str().c_str(), nullptr) == x) return os.str();  // strtod: no throw on subnormals
  }
  std::ostringstream os;
  os << std::setprecision(17) << x;
  return os.str();
}

}  // namespace minipipe
