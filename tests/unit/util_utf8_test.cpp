// UTF-8 cleaning and cutting: every kind of malformed sequence replaced, cuts never inside a
// character.
#include "kvprof/util/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvprof {
namespace {

const std::string k_bad = "\xef\xbf\xbd";  // U+FFFD

TEST(Utf8, ValidTextIsKept) {
  const std::string text = "plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \t\n";
  EXPECT_EQ(to_valid_utf8(text), text);
  EXPECT_EQ(to_valid_utf8(text, /*printable=*/true),
            "plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \t?");
}

TEST(Utf8, EveryMalformedSequenceIsReplaced) {
  EXPECT_EQ(to_valid_utf8("\xff"), k_bad);                          // never a first byte
  EXPECT_EQ(to_valid_utf8("\x80"), k_bad);                          // a lone continuation
  EXPECT_EQ(to_valid_utf8("a\xc3"), "a" + k_bad);                   // cut short
  EXPECT_EQ(to_valid_utf8("\xc0\x80"), k_bad + k_bad);              // overlong NUL
  EXPECT_EQ(to_valid_utf8("\xed\xa0\x80"), k_bad + k_bad + k_bad);  // a surrogate
  EXPECT_EQ(to_valid_utf8("\xf4\x90\x80\x80"), k_bad + k_bad + k_bad + k_bad);  // past U+10FFFF
  EXPECT_EQ(to_valid_utf8("\xe2\x82x"), k_bad + k_bad + "x");
}

TEST(Utf8, PrefixNeverEndsInsideACharacter) {
  const std::string euro = "\xe2\x82\xac";
  const std::string text = "ab" + euro + "cd";
  EXPECT_EQ(utf8_prefix(text, 100), text);
  EXPECT_EQ(utf8_prefix(text, 2), "ab");
  EXPECT_EQ(utf8_prefix(text, 3), "ab");
  EXPECT_EQ(utf8_prefix(text, 4), "ab");
  EXPECT_EQ(utf8_prefix(text, 5), "ab" + euro);
  EXPECT_EQ(utf8_prefix(text, 0), "");
  EXPECT_EQ(utf8_prefix("\xf0\x9f\x98\x80", 3), "");
}

TEST(Utf8, OneLineIsPrintableAndBounded) {
  EXPECT_EQ(one_line("a\tb\r\nc\x01\x7f"), "a b  c??");
  EXPECT_EQ(one_line("bad \xff"), "bad " + k_bad);
  EXPECT_EQ(one_line(std::string(300, 'a')), std::string(300, 'a'));
  // A cut at 300 bytes that would fall inside the two-byte character: cut before it.
  EXPECT_EQ(one_line(std::string(299, 'a') + "\xc3\xa9"), std::string(299, 'a') + "...");
  EXPECT_EQ(one_line("abcdef", 3), "abc...");
}

}  // namespace
}  // namespace kvprof
