// The byte-level tokenizer of `minipipe tokenize`: UTF-8 validation against RFC 3629's table and
// the row layout (overlap by one byte, -1 padding, no row across documents) written out by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "miniapp/tools/tokenize_tool.hpp"

namespace {

using minipipe::append_document_rows;
using minipipe::first_invalid_utf8;
constexpr auto kValid = std::string_view::npos;

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(first_invalid_utf8(""), kValid);
  EXPECT_EQ(first_invalid_utf8("plain ASCII\n\t"), kValid);
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"),
            kValid);  // é € 😀 U+10FFFF
  EXPECT_EQ(first_invalid_utf8(std::string("nul \0 byte", 10)), kValid);
}

TEST(Utf8, NamesTheFirstBadByte) {
  EXPECT_EQ(first_invalid_utf8("ab\xFF"), 2u);            // never valid
  EXPECT_EQ(first_invalid_utf8("x\xC0\x80"), 1u);         // overlong NUL
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);      // overlong '/'
  EXPECT_EQ(first_invalid_utf8("ok\xED\xA0\x80"), 2u);    // surrogate U+D800
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\xE2\x82"), 2u);  // truncated at the end
  EXPECT_EQ(first_invalid_utf8("\x80 lone continuation"), 0u);
  EXPECT_EQ(first_invalid_utf8("\xC3(\xA9"), 0u);  // continuation missing
}

TEST(TokenRows, OverlapByOneAndPadTheLastRow) {
  std::vector<std::int32_t> rows;
  // 8 bytes, T = 3: 7 targets need ceil(7 / 3) = 3 rows of 4 tokens.
  EXPECT_EQ(append_document_rows("abcdefgh", 3, rows), 3u);
  const std::vector<std::int32_t> want = {'a', 'b', 'c', 'd', 'd', 'e', 'f', 'g', 'g', 'h', -1, -1};
  EXPECT_EQ(rows, want);
}

TEST(TokenRows, ExactFitHasNoPadding) {
  std::vector<std::int32_t> rows;
  EXPECT_EQ(append_document_rows("abcdefg", 3, rows), 2u);  // 6 targets, 2 full rows
  const std::vector<std::int32_t> want = {'a', 'b', 'c', 'd', 'd', 'e', 'f', 'g'};
  EXPECT_EQ(rows, want);
}

TEST(TokenRows, DocumentsNeverShareARow) {
  std::vector<std::int32_t> rows;
  EXPECT_EQ(append_document_rows("xyz", 4, rows), 1u);
  EXPECT_EQ(append_document_rows("q", 4, rows), 0u);  // one byte: no target, no row
  EXPECT_EQ(append_document_rows("\xC3\xA9!", 4, rows), 1u);
  const std::vector<std::int32_t> want = {'x', 'y', 'z', -1, -1, 0xC3, 0xA9, '!', -1, -1};
  EXPECT_EQ(rows, want);
}

TEST(TokenRows, BytesAboveAsciiAreTokensUpTo255) {
  std::vector<std::int32_t> rows;
  append_document_rows("\xFF\x80\x01", 2, rows);
  const std::vector<std::int32_t> want = {255, 128, 1};
  EXPECT_EQ(rows, want);
}

}  // namespace
