#include "util/svg.hpp"

#include <cstdio>
#include <sstream>

namespace minipipe::util {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
          out += "\xEF\xBF\xBD";
        else
          out += c;
    }
  }
  return out;
}

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

SvgWriter::SvgWriter(std::ostream& out, const Attr& width, const Attr& height, Attrs attrs) : out_(out) {
  out_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << xml_escape(width.value) << "\" height=\""
       << xml_escape(height.value) << "\"";
  for (const Attr& a : attrs) out_ << ' ' << a.name << "=\"" << xml_escape(a.value) << '"';
  out_ << ">\n";
  element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "white"}});
  newline();
}

void SvgWriter::start_tag(std::string_view name, Attrs attrs) {
  out_ << '<' << name;
  for (const Attr& a : attrs) out_ << ' ' << a.name << "=\"" << xml_escape(a.value) << '"';
}

SvgWriter& SvgWriter::element(std::string_view name, Attrs attrs) {
  start_tag(name, attrs);
  out_ << "/>";
  return *this;
}

SvgWriter& SvgWriter::element(std::string_view name, Attrs attrs, std::string_view text) {
  start_tag(name, attrs);
  out_ << '>' << xml_escape(text) << "</" << name << '>';
  return *this;
}

SvgWriter& SvgWriter::open(std::string_view name, Attrs attrs) {
  start_tag(name, attrs);
  out_ << '>';
  return *this;
}

SvgWriter& SvgWriter::close(std::string_view name) {
  out_ << "</" << name << '>';
  return *this;
}

SvgWriter& SvgWriter::newline() {
  out_ << '\n';
  return *this;
}

void SvgWriter::finish() {
  out_ << "</svg>\n";
}

}  // namespace minipipe::util
