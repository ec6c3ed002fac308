// SVG and Chrome-trace writers for per-rank action timelines.
// The SVG goes through util's writer; the trace is JSON text built here.
#include "schedules/timeline.hpp"

#include "schedules/text.hpp"
#include "util/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace minipipe::sched {

namespace {

using util::Attrs;
using util::fixed;
using util::SvgWriter;

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

  SvgWriter svg(out, {"width", fixed(width, 0)}, {"height", fixed(height, 0)}, {{"font-family", "sans-serif"}});
  svg.element("text", {{"x", fixed(left)}, {"y", "22"}, {"font-size", "14"}}, tl.title).newline();
  for (int r = 0; r < p; ++r) {
    const double y = top + r * (row_h + gap);
    svg.element("text",
                {{"x", fixed(left - 8)}, {"y", fixed(y + row_h * 0.7)}, {"font-size", "12"}, {"text-anchor", "end"}},
                "rank " + std::to_string(r))
        .newline();
    // Grey background: whatever it shows through is idle time.
    svg.element("rect", {{"x", fixed(left)},
                         {"y", fixed(y)},
                         {"width", fixed(plot_w)},
                         {"height", fixed(row_h)},
                         {"fill", "#e6e6e6"}})
        .newline();
  }
  for (const auto& e : tl.events) {
    const double x = left + (e.start - t0) * scale, y = top + e.rank * (row_h + gap);
    const double w = std::max((e.end - e.start) * scale, 0.5);
    const bool compute = e.label.empty();
    const double light = compute ? chunk_shade(e) : 0.0;
    svg.open("g").element(
        "title", {},
        "rank " + std::to_string(e.rank) + " " +
            (compute ? std::to_string(e.stage) + op_name(e.op) + std::to_string(e.microbatch) : e.label) +
            (e.overlapped ? " (OVERLAP_F_B)" : "") + " [" + fixed(e.start, 3) + ", " + fixed(e.end, 3) + "] " +
            tl.unit);
    const std::string fill = compute ? shade(base_colour(e.op), light) : std::string("#555555");
    if (e.overlapped)
      svg.element("rect", {{"x", fixed(x)},
                           {"y", fixed(y)},
                           {"width", fixed(w)},
                           {"height", fixed(row_h)},
                           {"fill", fill},
                           {"stroke", "#6a3d9a"},
                           {"stroke-width", "1.5"}});
    else
      svg.element("rect", {{"x", fixed(x)},
                           {"y", fixed(y)},
                           {"width", fixed(w)},
                           {"height", fixed(row_h)},
                           {"fill", fill},
                           {"stroke", "white"},
                           {"stroke-width", "0.5"}});
    const std::string label = compute ? std::to_string(e.microbatch) : e.label;
    const double font = std::min(12.0, 1.6 * w / static_cast<double>(util::xml_escape(label).size()));
    if (font >= 5.0)
      svg.element("text",
                  {{"x", fixed(x + w / 2)},
                   {"y", fixed(y + row_h / 2 + font * 0.35)},
                   {"font-size", fixed(font, 1)},
                   {"text-anchor", "middle"},
                   {"fill", light > 0.2 ? "#222222" : "white"}},
                  label);
    svg.close("g").newline();
  }
  // Time axis.
  const double axis_y = top + plot_h + 4, step = nice_step(span);
  svg.element("line", {{"x1", fixed(left)},
                       {"y1", fixed(axis_y)},
                       {"x2", fixed(left + plot_w)},
                       {"y2", fixed(axis_y)},
                       {"stroke", "black"}})
      .newline();
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    const double x = left + t * scale;
    svg.element(
           "line",
           {{"x1", fixed(x)}, {"y1", fixed(axis_y)}, {"x2", fixed(x)}, {"y2", fixed(axis_y + 5)}, {"stroke", "black"}})
        .element("text", {{"x", fixed(x)}, {"y", fixed(axis_y + 18)}, {"font-size", "10"}, {"text-anchor", "middle"}},
                 fixed(t0 + t, step < 1 ? 2 : 0))
        .newline();
  }
  svg.element("text",
              {{"x", fixed(left + plot_w)}, {"y", fixed(axis_y + 32)}, {"font-size", "11"}, {"text-anchor", "end"}},
              "time (" + tl.unit + ")")
      .newline();
  // Legend.
  double lx = left;
  const double ly = axis_y + 40;
  auto key = [&](std::string_view text, Attrs box) {
    svg.element("rect", box)
        .element("text", {{"x", fixed(lx + 18)}, {"y", fixed(ly + 11)}, {"font-size", "11"}}, text)
        .newline();
  };
  for (Op op : {Op::F, Op::B, Op::I, Op::W}) {
    key(op_name(op),
        {{"x", fixed(lx)}, {"y", fixed(ly)}, {"width", "14"}, {"height", "14"}, {"fill", shade(base_colour(op), 0)}});
    lx += 50;
  }
  key("OVERLAP_F_B half", {{"x", fixed(lx)},
                           {"y", fixed(ly)},
                           {"width", "14"},
                           {"height", "14"},
                           {"fill", "white"},
                           {"stroke", "#6a3d9a"},
                           {"stroke-width", "1.5"}});
  lx += 130;
  key("idle (lighter boxes: later chunks; numbers: micro-batch)",
      {{"x", fixed(lx)}, {"y", fixed(ly)}, {"width", "14"}, {"height", "14"}, {"fill", "#e6e6e6"}});
  svg.finish();
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
