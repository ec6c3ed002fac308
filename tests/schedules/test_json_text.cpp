// sched::json_text, the project's one JSON writer: the layout (one line for a container without
// objects, one member per line otherwise, inline_depth), escaping and number text against texts
// written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "schedules/text.hpp"

namespace ms = minipipe::sched;

TEST(JsonText, ContainersWithoutObjectsAreOneLineOthersOneMemberPerLine) {
  ms::Json j;
  j["name"] = "1f1b";
  j["p"] = 2;
  j["costs"] = {{"F", {1.0, 0.5}}, {"comm", 0}};
  j["ranks"] = ms::Json::array({ms::Json{{"rank", 0}, {"stages", {0, 3}}}, ms::Json{{"rank", 1}, {"stages", {1, 2}}}});
  j["empty"] = ms::Json::object();
  j["none"] = ms::Json::array();
  EXPECT_EQ(ms::json_text(j),
            "{\n"
            "  \"name\": \"1f1b\",\n"
            "  \"p\": 2,\n"
            "  \"costs\": {\"F\": [1.0, 0.5], \"comm\": 0},\n"
            "  \"ranks\": [\n"
            "    {\"rank\": 0, \"stages\": [0, 3]},\n"
            "    {\"rank\": 1, \"stages\": [1, 2]}\n"
            "  ],\n"
            "  \"empty\": {},\n"
            "  \"none\": []\n"
            "}");
  // From depth 1 on everything is inline: the top object still breaks, its members do not.
  EXPECT_EQ(ms::json_text(ms::Json{{"a", {{"b", {{"c", 1}}}}}, {"d", 2}}, 1),
            "{\n  \"a\": {\"b\": {\"c\": 1}},\n  \"d\": 2\n}");
  EXPECT_EQ(ms::json_text(ms::Json{{"a", {{"b", {{"c", 1}}}}}}), "{\n  \"a\": {\n    \"b\": {\"c\": 1}\n  }\n}");
}

TEST(JsonText, StringsAreEscapedAndInvalidUtf8IsReplaced) {
  // Quote, backslash, newline, tab, two control bytes, DEL (kept), e-acute (valid UTF-8, kept).
  EXPECT_EQ(ms::json_text(ms::Json("a\"b\\c\nd\te\x01\x1f\x7f\xc3\xa9")),
            "\"a\\\"b\\\\c\\nd\\te\\u0001\\u001f\x7f\xc3\xa9\"");
  // A lone 0xff and a truncated two-byte sequence each become U+FFFD (EF BF BD); keys too.
  EXPECT_EQ(ms::json_text(ms::Json("x\xffy\xc3")), "\"x\xef\xbf\xbdy\xef\xbf\xbd\"");
  EXPECT_EQ(ms::json_text(ms::Json{{"k\xff", 1}}), "{\"k\xef\xbf\xbd\": 1}");
}

TEST(JsonText, NumbersReadBackExactlyAndNonFiniteIsNull) {
  const double third = 1.0 / 3, tiny = 4.9406564584124654e-324, big = 1.7976931348623157e308;
  EXPECT_EQ(ms::json_text(ms::Json::array({0.1, third, tiny, big, 2.0, -0.0, 7, -3})),
            "[0.1, 0.3333333333333333, 5e-324, 1.7976931348623157e+308, 2.0, -0.0, 7, -3]");
  EXPECT_EQ(std::strtod("0.3333333333333333", nullptr), third);  // the shortest text is the same double
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ms::json_text(ms::Json::array({std::nan(""), inf, -inf})), "[null, null, null]");
}
