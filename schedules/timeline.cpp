// SVG and Chrome-trace writers for per-rank action timelines.
// Both are plain text built by hand so the library needs nothing beyond the standard library.
#include "schedules/timeline.hpp"

#include "schedules/text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace minipipe::sched {

namespace {

std::string xml_escape(const std::string& text) {
  std::string out;
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
        // XML 1.0 allows no control character but tab, newline and return, not even as a
        // reference: a file name holding one would make the SVG unreadable.
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
          out += "\xEF\xBF\xBD";  // U+FFFD, the replacement character
        else
          out += c;
    }
  }
  return out;
}

std::string num(double x, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

struct Rgb {
  int r, g, b;
};

Rgb base_colour(Op op) {
  switch (op) {
    case Op::F:
      return {78, 121, 167};  // blue
    case Op::B:
      return {242, 142, 43};  // orange
    case Op::I:
      return {118, 183, 178};  // teal
    case Op::W:
      return {89, 161, 79};  // green
    default:
      return {150, 150, 150};
  }
}

// Later chunks of a rank are drawn lighter so interleaved and V schedules stay readable.
std::string shade(Rgb c, double towards_white) {
  auto mix = [&](int v) { return static_cast<int>(std::lround(v + (255 - v) * towards_white)); };
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(c.r), mix(c.g), mix(c.b));
  return buf;
}

double nice_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 10.0, p10 = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (raw <= f * p10) return f * p10;
  return 10 * p10;
}

}  // namespace

void write_svg(const Timeline& tl, std::ostream& out) {
  const int p = std::max(tl.p, 1);
  double t0 = 0, t1 = 0;
  bool first = true;
  for (const auto& e : tl.events) {
    t0 = first ? e.start : std::min(t0, e.start);
    t1 = first ? e.end : std::max(t1, e.end);
    first = false;
  }
  const double span = t1 > t0 ? t1 - t0 : 1.0;
  const double left = 70, top = 40, row_h = 24, gap = 4, plot_w = 1200;
  const double plot_h = p * (row_h + gap);
  const double width = left + plot_w + 20, height = top + plot_h + 70;
  const double scale = plot_w / span;

  // Chunk index of each stage on its rank: position among the stages seen on that rank.
  std::map<int, std::set<int>> stages_on_rank;
  for (const auto& e : tl.events)
    if (e.label.empty()) stages_on_rank[e.rank].insert(e.stage);
  auto chunk_shade = [&](const TimelineEvent& e) {
    const auto& set = stages_on_rank[e.rank];
    const auto idx = static_cast<double>(std::distance(set.begin(), set.find(e.stage)));
    return set.size() > 1 ? 0.5 * idx / static_cast<double>(set.size() - 1) : 0.0;
  };

  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width, 0) << "\" height=\"" << num(height, 0)
      << "\" font-family=\"sans-serif\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << num(left) << "\" y=\"22\" font-size=\"14\">" << xml_escape(tl.title) << "</text>\n";
  for (int r = 0; r < p; ++r) {
    const double y = top + r * (row_h + gap);
    out << "<text x=\"" << num(left - 8) << "\" y=\"" << num(y + row_h * 0.7)
        << "\" font-size=\"12\" text-anchor=\"end\">rank " << r << "</text>\n";
    // Grey background: whatever it shows through is idle time.
    out << "<rect x=\"" << num(left) << "\" y=\"" << num(y) << "\" width=\"" << num(plot_w) << "\" height=\""
        << num(row_h) << "\" fill=\"#e6e6e6\"/>\n";
  }
  for (const auto& e : tl.events) {
    const double x = left + (e.start - t0) * scale, y = top + e.rank * (row_h + gap);
    const double w = std::max((e.end - e.start) * scale, 0.5);
    const bool compute = e.label.empty();
    const double light = compute ? chunk_shade(e) : 0.0;
    out << "<g><title>rank " << e.rank << " "
        << (compute ? std::to_string(e.stage) + op_name(e.op) + std::to_string(e.microbatch) : xml_escape(e.label))
        << (e.overlapped ? " (OVERLAP_F_B)" : "") << " [" << num(e.start, 3) << ", " << num(e.end, 3) << "] "
        << xml_escape(tl.unit) << "</title>";
    out << "<rect x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w) << "\" height=\"" << num(row_h)
        << "\" fill=\"" << (compute ? shade(base_colour(e.op), light) : std::string("#555555")) << "\""
        << (e.overlapped ? " stroke=\"#6a3d9a\" stroke-width=\"1.5\"" : " stroke=\"white\" stroke-width=\"0.5\"")
        << "/>";
    const std::string label = compute ? std::to_string(e.microbatch) : xml_escape(e.label);
    const double font = std::min(12.0, 1.6 * w / static_cast<double>(label.size()));
    if (font >= 5.0)
      out << "<text x=\"" << num(x + w / 2) << "\" y=\"" << num(y + row_h / 2 + font * 0.35) << "\" font-size=\""
          << num(font, 1) << "\" text-anchor=\"middle\" fill=\"" << (light > 0.2 ? "#222222" : "white") << "\">"
          << label << "</text>";
    out << "</g>\n";
  }
  // Time axis.
  const double axis_y = top + plot_h + 4, step = nice_step(span);
  out << "<line x1=\"" << num(left) << "\" y1=\"" << num(axis_y) << "\" x2=\"" << num(left + plot_w) << "\" y2=\""
      << num(axis_y) << "\" stroke=\"black\"/>\n";
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    const double x = left + t * scale;
    out << "<line x1=\"" << num(x) << "\" y1=\"" << num(axis_y) << "\" x2=\"" << num(x) << "\" y2=\"" << num(axis_y + 5)
        << "\" stroke=\"black\"/><text x=\"" << num(x) << "\" y=\"" << num(axis_y + 18)
        << "\" font-size=\"10\" text-anchor=\"middle\">" << num(t0 + t, step < 1 ? 2 : 0) << "</text>\n";
  }
  out << "<text x=\"" << num(left + plot_w) << "\" y=\"" << num(axis_y + 32)
      << "\" font-size=\"11\" text-anchor=\"end\">time (" << xml_escape(tl.unit) << ")</text>\n";
  // Legend.
  double lx = left;
  const double ly = axis_y + 40;
  for (Op op : {Op::F, Op::B, Op::I, Op::W}) {
    out << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly) << "\" width=\"14\" height=\"14\" fill=\""
        << shade(base_colour(op), 0) << "\"/><text x=\"" << num(lx + 18) << "\" y=\"" << num(ly + 11)
        << "\" font-size=\"11\">" << op_name(op) << "</text>\n";
    lx += 50;
  }
  out << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly) << "\" width=\"14\" height=\"14\" fill=\"white\" "
      << "stroke=\"#6a3d9a\" stroke-width=\"1.5\"/><text x=\"" << num(lx + 18) << "\" y=\"" << num(ly + 11)
      << "\" font-size=\"11\">OVERLAP_F_B half</text>\n";
  lx += 130;
  out << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly) << "\" width=\"14\" height=\"14\" fill=\"#e6e6e6\"/>"
      << "<text x=\"" << num(lx + 18) << "\" y=\"" << num(ly + 11)
      << "\" font-size=\"11\">idle (lighter boxes: later chunks; numbers: micro-batch)</text>\n";
  out << "</svg>\n";
}

void write_chrome_trace(const Timeline& tl, std::ostream& out) {
  // Microseconds to the nanosecond (what the viewer resolves), as JSON numbers.
  auto us = [&](double t) { return std::round(t * tl.us_per_unit * 1e3) / 1e3; };
  Json events = Json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"tid", 0},
                    {"args", {{"name", tl.title.empty() ? "pipeline" : tl.title}}}});
  for (int r = 0; r < tl.p; ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back(
        {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", r}, {"args", {{"sort_index", r}}}});
  }
  for (const auto& e : tl.events) {
    const bool compute = e.label.empty();
    events.push_back(
        {{"name", compute ? std::to_string(e.stage) + op_name(e.op) + std::to_string(e.microbatch) : e.label},
         {"cat", compute ? std::string(op_name(e.op)) : std::string("communication")},
         {"ph", "X"},
         {"pid", 0},
         {"tid", e.rank},
         {"ts", us(e.start)},
         {"dur", us(e.end - e.start)},
         {"args", {{"stage", e.stage}, {"microbatch", e.microbatch}, {"overlapped", e.overlapped}}}});
  }
  // One event per line: depth 2 (the events) and below are written inline.
  out << json_text(Json{{"displayTimeUnit", "ms"}, {"traceEvents", events}}, 2) << "\n";
}

}  // namespace minipipe::sched
