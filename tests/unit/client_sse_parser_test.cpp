// Tests for src/kvprof/client/sse_parser.cpp: events must not depend on where bytes are split.
#include "kvprof/client/sse_parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvprof::client {
namespace {

std::vector<SseEvent> parse_all(std::string_view bytes, size_t max_event = 1 << 20) {
  SseParser parser(max_event);
  std::vector<SseEvent> out;
  EXPECT_TRUE(parser.feed(bytes, out)) << parser.error();
  return out;
}

// A stream in vLLM's shape, with a multi-byte UTF-8 token, a comment and a usage chunk.
const std::string k_stream =
    ": keep-alive comment\n\n"
    "data: {\"choices\":[{\"index\":0,\"text\":\" caf\xC3\xA9\",\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"text\":\" \xE2\x82\xAC\xF0\x9F\x98\x80\"}]}\r\n\r\n"
    "event: message\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,"
    "\"completion_tokens\":2}}\r\rdata: [DONE]\n\n";

TEST(SseParser, ParsesAStreamWhole) {
  const auto events = parse_all(k_stream);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_NE(events[0].data.find("caf\xC3\xA9"), std::string::npos);
  EXPECT_EQ(events[2].type, "message");
  EXPECT_NE(events[2].data.find("usage"), std::string::npos);
  EXPECT_EQ(events[3].data, "[DONE]");
}

TEST(SseParser, EverySplitPositionGivesTheSameEvents) {
  const auto whole = parse_all(k_stream);
  for (size_t cut = 0; cut <= k_stream.size(); ++cut) {
    SseParser parser;
    std::vector<SseEvent> out;
    ASSERT_TRUE(parser.feed(std::string_view(k_stream).substr(0, cut), out));
    ASSERT_TRUE(parser.feed(std::string_view(k_stream).substr(cut), out));
    ASSERT_EQ(out.size(), whole.size()) << "cut at " << cut;
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].data, whole[i].data) << "cut at " << cut;
      EXPECT_EQ(out[i].type, whole[i].type) << "cut at " << cut;
    }
    EXPECT_FALSE(parser.has_partial_event());
  }
}

TEST(SseParser, ByteAtATimeGivesTheSameEvents) {
  const auto whole = parse_all(k_stream);
  SseParser parser;
  std::vector<SseEvent> out;
  for (const char c : k_stream)
    ASSERT_TRUE(parser.feed(std::string_view(&c, 1), out));
  ASSERT_EQ(out.size(), whole.size());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i].data, whole[i].data);
}

TEST(SseParser, ViewsHandedToTheCallbackMatchTheCopiesAtEverySplit) {
  const auto whole = parse_all(k_stream);
  for (size_t cut = 0; cut <= k_stream.size(); ++cut) {
    SseParser parser;
    std::vector<std::string> seen;
    const auto keep = [&seen](const SseEventView& event) {
      seen.push_back(std::string(event.type) + "|" + std::string(event.id) + "|" +
                     std::string(event.data));
      return true;
    };
    ASSERT_TRUE(parser.feed(std::string_view(k_stream).substr(0, cut), keep));
    ASSERT_TRUE(parser.feed(std::string_view(k_stream).substr(cut), keep));
    ASSERT_EQ(seen.size(), whole.size()) << "cut at " << cut;
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i], whole[i].type + "|" + whole[i].id + "|" + whole[i].data)
          << "cut at " << cut;
    }
  }
}

TEST(SseParser, ACallbackThatReturnsFalseStopsTheParserWithoutAnError) {
  SseParser parser;
  int calls = 0;
  const auto stop_at_second = [&calls](const SseEventView&) { return ++calls < 2; };
  EXPECT_TRUE(parser.feed("data: a\n\ndata: b\n\ndata: c\n\n", stop_at_second));
  EXPECT_EQ(calls, 2);  // "c" was never dispatched
  EXPECT_TRUE(parser.feed("data: d\n\n", stop_at_second));
  EXPECT_EQ(calls, 2);  // nor anything fed later
  EXPECT_FALSE(parser.failed());
}

TEST(SseParser, LineEndingsCrLfAndCrAreEquivalent) {
  for (const std::string eol : {"\n", "\r\n", "\r"}) {
    const std::string s = "data: a" + eol + "data: b" + eol + eol + "data: c" + eol + eol;
    const auto events = parse_all(s);
    ASSERT_EQ(events.size(), 2u) << "eol size " << eol.size();
    EXPECT_EQ(events[0].data, "a\nb");
    EXPECT_EQ(events[1].data, "c");
  }
}

TEST(SseParser, CrAtTheEndOfOneChunkAndLfAtTheStartOfTheNext) {
  SseParser parser;
  std::vector<SseEvent> out;
  ASSERT_TRUE(parser.feed("data: x\r", out));
  ASSERT_TRUE(parser.feed("\n\r", out));
  ASSERT_EQ(out.size(), 1u);  // "\r\n" ends the line, the lone "\r" is the blank line
  ASSERT_TRUE(parser.feed("\ndata: y\n\n", out));  // this "\n" belongs to the "\r" before it
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].data, "y");
}

TEST(SseParser, FieldsCommentsAndSpaces) {
  const auto events = parse_all(
      ":comment\nevent: error\nid: 7\ndata:no-space\ndata:  two-spaces\nretry: 10\nbogus: 1\n"
      "data\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "error");
  EXPECT_EQ(events[0].id, "7");
  EXPECT_EQ(events[0].data, "no-space\n two-spaces\n");
}

TEST(SseParser, EventWithoutDataIsNotDispatchedAndTypeResets) {
  const auto events = parse_all("event: ping\n\ndata: x\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "message");
}

TEST(SseParser, LeadingBomIsSkipped) {
  const auto events = parse_all(
      "\xEF\xBB\xBF"
      "data: x\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "x");
}

TEST(SseParser, UnterminatedEventIsReportedAsPartial) {
  SseParser parser;
  std::vector<SseEvent> out;
  ASSERT_TRUE(parser.feed("data: {\"a\":1}\n", out));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(parser.has_partial_event());
}

TEST(SseParser, OversizedLineFails) {
  SseParser parser(64);
  std::vector<SseEvent> out;
  EXPECT_TRUE(parser.feed("data: ", out));
  EXPECT_FALSE(parser.feed(std::string(100, 'x'), out));
  EXPECT_TRUE(parser.failed());
  EXPECT_NE(parser.error().find("64"), std::string::npos);
  EXPECT_FALSE(parser.feed("\n\ndata: ok\n\n", out));  // input after a failure is ignored
  EXPECT_TRUE(out.empty());
}

TEST(SseParser, OversizedEventFromManyDataLinesFails) {
  SseParser parser(64);
  std::vector<SseEvent> out;
  std::string s;
  for (int i = 0; i < 10; ++i)
    s += "data: 0123456789\n";
  EXPECT_FALSE(parser.feed(s, out));
  EXPECT_TRUE(out.empty());
}

TEST(SseParser, DefaultBoundIsFourMiB) {
  SseParser parser;
  std::vector<SseEvent> out;
  const std::string big(SseParser::k_default_max_event_bytes + 1, 'x');
  EXPECT_FALSE(parser.feed("data: " + big + "\n\n", out));
}

}  // namespace
}  // namespace kvprof::client
