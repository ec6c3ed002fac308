// The SVG writer's bytes for a small picture, written out by hand, and the project's pictures
// with hostile text (markup characters, a control character) in every place a user's text goes.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "miniapp/report/kernel_report.hpp"
#include "miniapp/report/time_budget.hpp"
#include "schedules/timeline.hpp"
#include "util/svg.hpp"

namespace {

using minipipe::util::SvgWriter;

TEST(Svg, EscapesMarkupAndReplacesControlCharacters) {
  EXPECT_EQ(minipipe::util::xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c'");
  EXPECT_EQ(minipipe::util::xml_escape(std::string("x\x01y\x7f"
                                                   "z\t\n")),
            "x\xEF\xBF\xBDy\xEF\xBF\xBDz\t\n");
}

TEST(Svg, NumbersAsFixedAndAsAStreamWritesThem) {
  EXPECT_EQ(minipipe::util::fixed(2.0 / 3.0), "0.67");
  EXPECT_EQ(minipipe::util::fixed(1290.4, 0), "1290");
  EXPECT_EQ(minipipe::util::number(520.0), "520");
  EXPECT_EQ(minipipe::util::number(1.0 / 3.0), "0.333333");
}

TEST(Svg, WritesElementsExactlyAsGiven) {
  std::ostringstream out;
  SvgWriter svg(out, {"width", 100}, {"height", 50.5}, {{"font-family", "sans-serif"}});
  svg.open("g").element("title", {}, "a & b").element("rect", {{"x", minipipe::util::fixed(1.0, 1)}, {"fill", "#fff"}});
  svg.close("g").newline().element("text", {{"x", 3}, {"y", 4.25}}, "1<2").newline();
  svg.finish();
  EXPECT_EQ(out.str(),
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100\" height=\"50.5\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
            "<g><title>a &amp; b</title><rect x=\"1.0\" fill=\"#fff\"/></g>\n"
            "<text x=\"3\" y=\"4.25\">1&lt;2</text>\n"
            "</svg>\n");
}

// No raw markup character of `hostile` may reach the picture; its escaped form must.
void expect_escaped(const std::string& svg, const std::string& hostile, const std::string& escaped) {
  EXPECT_EQ(svg.find(hostile), std::string::npos) << svg;
  EXPECT_NE(svg.find(escaped), std::string::npos) << svg;
}

TEST(Svg, EveryPictureEscapesTheTextItIsGiven) {
  const std::string hostile = "R&D <run \"1\">", escaped = "R&amp;D &lt;run &quot;1&quot;&gt;";

  minipipe::TimeBudget b;
  b.makespan = 1000000;
  minipipe::BudgetLine l;
  l.compute = 600000;
  l.ideal_bubble = 400000;
  b.ranks = {l, l};
  b.total = l;
  b.total += l;
  std::ostringstream budget;
  minipipe::write_budget_svg(b, hostile, budget);
  expect_escaped(budget.str(), hostile, escaped);

  minipipe::KernelCounterReport r;
  r.peaks.sgemm_gflops = 100;
  r.peaks.triad_gbs = 10;
  r.peaks.backend = hostile;
  r.work[hostile] = {1, 0.5, 1e9, 1e8, 1e9};
  std::ostringstream roof;
  minipipe::write_roofline_svg(r, roof);
  expect_escaped(roof.str(), hostile, escaped);

  minipipe::sched::Timeline tl;
  tl.p = 1;
  tl.title = hostile;
  tl.unit = "ms";
  minipipe::sched::TimelineEvent e;
  e.rank = 0;
  e.start = 0;
  e.end = 1;
  e.label = hostile;
  tl.events.push_back(e);
  std::ostringstream timeline;
  minipipe::sched::write_svg(tl, timeline);
  expect_escaped(timeline.str(), hostile, escaped);
}

}  // namespace
