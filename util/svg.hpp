// SVG as the project writes it: one writer for every picture (schedule timelines, the time
// budget, the kernel roofline, the scaling curves), so that text from a user (a title, a cluster
// or kernel name) is escaped in one place and every picture is well-formed XML.
#pragma once

#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>

namespace minipipe::util {

// Text as XML takes it in a text node or an attribute value: & < > " as references; a control
// character other than tab, newline and return (which XML 1.0 allows nowhere, not even as a
// reference) as U+FFFD, the replacement character.
std::string xml_escape(std::string_view text);

// x with `decimals` digits after the point (printf's %.*f).
std::string fixed(double x, int decimals = 2);
// x as an ostream writes it by default: six significant digits, no trailing zeros.
std::string number(double x);

// One attribute: its value is written escaped. A double is written as number() writes it, an int
// in full; fixed() gives a set number of decimals.
struct Attr {
  Attr(const char* name, std::string value) : name(name), value(std::move(value)) {}
  Attr(const char* name, const char* value) : name(name), value(value) {}
  Attr(const char* name, double value) : name(name), value(number(value)) {}
  Attr(const char* name, int value) : name(name), value(std::to_string(value)) {}
  const char* name;
  std::string value;
};
using Attrs = std::initializer_list<Attr>;

// Writes an SVG document to `out` element by element. Nothing is added between elements: the
// caller places the newlines (newline()), so a picture's layout in the file is its own.
class SvgWriter {
 public:
  // <svg xmlns=... width height attrs...>, a newline and a white background.
  SvgWriter(std::ostream& out, const Attr& width, const Attr& height, Attrs attrs = {});
  // <name attrs.../>
  SvgWriter& element(std::string_view name, Attrs attrs);
  // <name attrs...>text</name>, the text escaped.
  SvgWriter& element(std::string_view name, Attrs attrs, std::string_view text);
  // <name attrs...> and </name>, for elements that hold others (a group, a titled shape).
  SvgWriter& open(std::string_view name, Attrs attrs = {});
  SvgWriter& close(std::string_view name);
  SvgWriter& newline();
  // </svg> and a newline; the document is complete.
  void finish();

 private:
  void start_tag(std::string_view name, Attrs attrs);
  std::ostream& out_;
};

}  // namespace minipipe::util
