// Tests for src/kvprof/client/http_response_parser.cpp: every framing split at every byte,
// hostile inputs (oversized heads, bad lengths and chunk sizes, overflow) and early EOF.
#include "kvprof/client/http_response_parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvprof::client {
namespace {

struct Collector final : HttpResponseHandler {
  std::vector<int> statuses;
  std::string body;
  size_t n_body_calls = 0;
  size_t stop_after_bytes = SIZE_MAX;
  const char* input_begin = nullptr;  // when set, body views must point into [begin, end)
  const char* input_end = nullptr;
  bool view_outside_input = false;

  void on_response_status(int http_status) override { statuses.push_back(http_status); }
  bool on_response_body(std::string_view bytes) override {
    ++n_body_calls;
    if (input_begin != nullptr &&
        (bytes.data() < input_begin || bytes.data() + bytes.size() > input_end)) {
      view_outside_input = true;
    }
    body.append(bytes);
    return body.size() < stop_after_bytes;
  }
};

struct Outcome {
  HttpParseState state = HttpParseState::need_more;
  HttpParseError error = HttpParseError::none;
  std::vector<int> statuses;
  std::string body;
  bool keep_alive = false;
  size_t consumed = 0;  // total bytes consumed
};

// Feeds `pieces` in order (then EOF when `eof`), stopping at the first final state.
Outcome run_pieces(const std::vector<std::string>& pieces, bool eof, HttpParserLimits limits = {}) {
  HttpResponseParser parser(limits);
  Collector handler;
  Outcome out;
  for (const auto& piece : pieces) {
    size_t used = 0;
    handler.input_begin = piece.data();
    handler.input_end = piece.data() + piece.size();
    out.state = parser.feed(piece, handler, used);
    out.consumed += used;
    EXPECT_FALSE(handler.view_outside_input) << "the body was copied, not viewed";
    if (out.state != HttpParseState::need_more) break;
  }
  if (eof && out.state == HttpParseState::need_more) out.state = parser.finish_at_eof();
  out.error = parser.error_kind();
  out.statuses = handler.statuses;
  out.body = handler.body;
  out.keep_alive = parser.keep_alive();
  if (out.state == HttpParseState::error) {
    EXPECT_FALSE(parser.error().empty());
    EXPECT_EQ(parser.error().find('\n'), std::string::npos);
  }
  return out;
}

// The same response fed whole, split in two at every byte, and one byte at a time must give
// the same result.
Outcome parse_every_split(const std::string& wire, bool eof, HttpParserLimits limits = {}) {
  const Outcome whole = run_pieces({wire}, eof, limits);
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    const Outcome split = run_pieces({wire.substr(0, cut), wire.substr(cut)}, eof, limits);
    EXPECT_EQ(split.state, whole.state) << "cut at " << cut;
    EXPECT_EQ(split.error, whole.error) << "cut at " << cut;
    EXPECT_EQ(split.body, whole.body) << "cut at " << cut;
    EXPECT_EQ(split.statuses, whole.statuses) << "cut at " << cut;
    EXPECT_EQ(split.keep_alive, whole.keep_alive) << "cut at " << cut;
    EXPECT_EQ(split.consumed, whole.consumed) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (const char c : wire)
    bytes.emplace_back(1, c);
  const Outcome dribbled = run_pieces(bytes, eof, limits);
  EXPECT_EQ(dribbled.state, whole.state);
  EXPECT_EQ(dribbled.body, whole.body);
  EXPECT_EQ(dribbled.consumed, whole.consumed);
  return whole;
}

constexpr const char* k_sse = "data: {\"choices\":[{\"text\":\" tok\"}]}\n\n";

std::string chunk(std::string_view payload, std::string_view ext = "") {
  char size[32];
  std::snprintf(size, sizeof size, "%zx", payload.size());
  return std::string(size) + std::string(ext) + "\r\n" + std::string(payload) + "\r\n";
}

TEST(HttpResponseParser, ContentLengthBodyAtEverySplit) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      "hello world";
  const Outcome o = parse_every_split(wire, false);
  EXPECT_EQ(o.state, HttpParseState::complete);
  EXPECT_EQ(o.statuses, std::vector<int>{200});
  EXPECT_EQ(o.body, "hello world");
  EXPECT_TRUE(o.keep_alive);
  EXPECT_EQ(o.consumed, wire.size());
}

TEST(HttpResponseParser, ChunkedBodyWithExtensionsAndTrailersAtEverySplit) {
  const std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(k_sse) +
                           chunk("data: [DONE]\n\n", ";name=value;x=\"q\"") +
                           "0 ; last\r\nTrailer-One: 1\r\nX-Checksum: abc\r\n\r\n";
  const Outcome o = parse_every_split(wire, false);
  EXPECT_EQ(o.state, HttpParseState::complete);
  EXPECT_EQ(o.body, std::string(k_sse) + "data: [DONE]\n\n");
  EXPECT_TRUE(o.keep_alive);
  EXPECT_EQ(o.consumed, wire.size());
}

TEST(HttpResponseParser, ChunkedWithUpperCaseHexAndBareLineFeeds) {
  const std::string payload(0x1A, 'x');
  const std::string wire =
      "HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\n\n1A\n" + payload + "\n0\n\n";
  const Outcome o = parse_every_split(wire, false);
  EXPECT_EQ(o.state, HttpParseState::complete);
  EXPECT_EQ(o.body, payload);
}

TEST(HttpResponseParser, CloseDelimitedBodyEndsAtEof) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + std::string(k_sse) + k_sse;
  const Outcome o = parse_every_split(wire, true);
  EXPECT_EQ(o.state, HttpParseState::complete);
  EXPECT_EQ(o.body, std::string(k_sse) + k_sse);
  EXPECT_FALSE(o.keep_alive);
  // Without the close it is still going.
  EXPECT_EQ(run_pieces({wire}, false).state, HttpParseState::need_more);
}

TEST(HttpResponseParser, NoBodyForNoContentAndInterimResponsesAreSkipped) {
  const Outcome no_content = parse_every_split("HTTP/1.1 204 No Content\r\nX: y\r\n\r\n", false);
  EXPECT_EQ(no_content.state, HttpParseState::complete);
  EXPECT_EQ(no_content.statuses, std::vector<int>{204});
  EXPECT_TRUE(no_content.keep_alive);

  const Outcome interim = parse_every_split(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
      false);
  EXPECT_EQ(interim.state, HttpParseState::complete);
  EXPECT_EQ(interim.statuses, std::vector<int>{200});  // interim statuses are not reported
  EXPECT_EQ(interim.body, "ok");
}

TEST(HttpResponseParser, KeepAliveRules) {
  EXPECT_FALSE(
      run_pieces({"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"}, false)
          .keep_alive);
  EXPECT_FALSE(run_pieces({"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"}, false).keep_alive);
  EXPECT_TRUE(
      run_pieces({"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"}, false)
          .keep_alive);
  // Transfer-Encoding wins over Content-Length, and such a connection is never reused.
  const Outcome both = run_pieces(
      {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n"
       "0\r\n\r\n"},
      false);
  EXPECT_EQ(both.state, HttpParseState::complete);
  EXPECT_EQ(both.body, "ab");
  EXPECT_FALSE(both.keep_alive);
  // A coding other than a final chunked is delimited by the close.
  const Outcome gzip =
      run_pieces({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nzz"}, true);
  EXPECT_EQ(gzip.state, HttpParseState::complete);
  EXPECT_EQ(gzip.body, "zz");
  EXPECT_FALSE(gzip.keep_alive);
}

TEST(HttpResponseParser, BytesAfterACompleteResponseAreNotConsumed) {
  const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  const Outcome o = run_pieces({first + "HTTP/1.1 200 OK\r\n"}, false);
  EXPECT_EQ(o.state, HttpParseState::complete);
  EXPECT_EQ(o.consumed, first.size());
}

TEST(HttpResponseParser, ResetParsesTheNextResponse) {
  HttpResponseParser parser;
  Collector handler;
  size_t used = 0;
  EXPECT_EQ(parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", handler, used),
            HttpParseState::complete);
  EXPECT_EQ(parser.feed("more", handler, used), HttpParseState::complete);
  EXPECT_EQ(used, 0u);
  parser.reset();
  EXPECT_FALSE(parser.started());
  EXPECT_EQ(parser.feed("HTTP/1.1 500 Oops\r\nContent-Length: 1\r\n\r\nb", handler, used),
            HttpParseState::complete);
  EXPECT_EQ(handler.statuses, (std::vector<int>{200, 500}));
  EXPECT_EQ(handler.body, "ab");
}

TEST(HttpResponseParser, HandlerStopsTheBody) {
  HttpResponseParser parser;
  Collector handler;
  handler.stop_after_bytes = 3;
  size_t used = 0;
  const std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
      "3\r\ndef\r\n0\r\n\r\n";
  EXPECT_EQ(parser.feed(wire, handler, used), HttpParseState::stopped);
  EXPECT_EQ(handler.body, "abc");
  EXPECT_LT(used, wire.size());
  EXPECT_FALSE(parser.keep_alive());
}

TEST(HttpResponseParser, OversizedHeadersAreRejected) {
  const std::string big = "HTTP/1.1 200 OK\r\nX-Big: " + std::string(70 * 1024, 'a') + "\r\n\r\n";
  const Outcome o = run_pieces({big}, false);
  EXPECT_EQ(o.state, HttpParseState::error);
  EXPECT_EQ(o.error, HttpParseError::headers_too_large);
  EXPECT_TRUE(o.statuses.empty());

  // Exactly at the bound is fine; one byte over is not.
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  HttpParserLimits limits;
  limits.max_header_bytes = head.size();
  EXPECT_EQ(run_pieces({head}, false, limits).state, HttpParseState::complete);
  limits.max_header_bytes = head.size() - 1;
  EXPECT_EQ(parse_every_split(head, false, limits).error, HttpParseError::headers_too_large);

  std::string many = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 300; ++i)
    many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(run_pieces({many + "\r\n"}, false).error, HttpParseError::headers_too_large);

  // Trailers are bounded too.
  limits.max_header_bytes = 100;
  const std::string trailers =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + std::string(200, 't') +
      "\r\n\r\n";
  EXPECT_EQ(run_pieces({trailers}, false, limits).error, HttpParseError::headers_too_large);
}

TEST(HttpResponseParser, BadStatusLinesAreRejected) {
  for (const char* line :
       {"HTTP/2 200 OK", "HTTP/1.1 20 OK", "HTTP/1.1 2000 OK", "ICY 200 OK", "HTTP/1.1 099 Low",
        "HTTP/1.1 600 High", "HTTP/1.1  200 OK", "http/1.1 200 OK", "HTTP/1.1 200OK", "",
        "HTTP/1.1 101 Switching Protocols"}) {
    const Outcome o = run_pieces({std::string(line) + "\r\nContent-Length: 0\r\n\r\n"}, false);
    EXPECT_EQ(o.state, HttpParseState::error) << line;
    EXPECT_EQ(o.error, HttpParseError::bad_status_line) << line;
  }
  // A status line without a reason phrase is fine.
  EXPECT_EQ(run_pieces({"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"}, false).state,
            HttpParseState::complete);
}

TEST(HttpResponseParser, BadHeadersAreRejected) {
  for (const char* header : {"No colon here", ": empty name", "Bad Name: x", "Name : x",
                             "X-Ctl: a\x01z", " folded: continuation", "X: a\rb"}) {
    const Outcome o = run_pieces(
        {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + std::string(header) + "\r\n\r\n"}, false);
    EXPECT_EQ(o.state, HttpParseState::error) << header;
    EXPECT_EQ(o.error, HttpParseError::bad_header) << header;
  }
}

TEST(HttpResponseParser, BadContentLengthsAreRejected) {
  for (const char* value : {"abc", "-1", "1e3", "", "99999999999999999999", "18446744073709551616",
                            "5, 6", "+5", "0x10"}) {
    const Outcome o = run_pieces(
        {"HTTP/1.1 200 OK\r\nContent-Length: " + std::string(value) + "\r\n\r\nhello"}, false);
    EXPECT_EQ(o.state, HttpParseState::error) << value;
    EXPECT_EQ(o.error, HttpParseError::bad_content_length) << value;
  }
  const Outcome dup =
      run_pieces({"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 4\r\n\r\nhello"}, false);
  EXPECT_EQ(dup.error, HttpParseError::bad_content_length);
  const Outcome same = run_pieces({"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello"}, false);
  EXPECT_EQ(same.state, HttpParseState::complete);
  EXPECT_EQ(same.body, "hello");
  // The largest length parses (and then waits for its body).
  EXPECT_EQ(run_pieces({"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nab"}, false)
                .state,
            HttpParseState::need_more);
}

TEST(HttpResponseParser, BadChunksAreRejected) {
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& body : {
           std::string("zz\r\nab\r\n0\r\n\r\n"),   // not hex
           std::string("\r\nab\r\n0\r\n\r\n"),     // empty size
           std::string("-2\r\nab\r\n0\r\n\r\n"),   // signed
           std::string("2\r\nabc\r\n0\r\n\r\n"),   // data longer than its size
           std::string("2\rX\nab\r\n"),            // CR without LF
           std::string("2\r\nab\rX"),              // CR without LF after data
           std::string("1000000000000000\r\n"),    // 16 hex digits: past the bound
           std::string("ffffffffffffffffff\r\n"),  // would overflow 64 bits
           std::string("2;") + std::string(5000, 'e') + "\r\nab\r\n",  // endless extension
           std::string("2;ext\x01\r\nab\r\n"),                         // control char
           std::string("2 x\r\nab\r\n0\r\n\r\n") + std::string(1, '\0'),
       }) {
    const Outcome o = run_pieces({head + body}, false);
    if (body.starts_with("2 x")) {  // whitespace then an extension-like tail is tolerated
      EXPECT_EQ(o.state, HttpParseState::complete);
      continue;
    }
    EXPECT_EQ(o.state, HttpParseState::error) << body.substr(0, 40);
    EXPECT_EQ(o.error, HttpParseError::bad_chunk) << body.substr(0, 40);
  }
  // The largest accepted chunk size parses (and then waits for its data).
  EXPECT_EQ(run_pieces({head + "fffffffffffffff\r\nab"}, false).state, HttpParseState::need_more);
}

TEST(HttpResponseParser, ChunkLineLimitHoldsWhereverTheInputIsCut) {
  // A whole "<hex>\r\n" line takes a fast path; it must obey the same limit as the slow one
  // (found by fuzz/http_response_fuzz.cpp: whole and split input gave different results).
  HttpParserLimits limits;
  limits.max_chunk_line_bytes = 8;
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const Outcome long_line =
      parse_every_split(head + "000000000001\r\nx\r\n0\r\n\r\n", false, limits);
  EXPECT_EQ(long_line.state, HttpParseState::error);
  EXPECT_EQ(long_line.error, HttpParseError::bad_chunk);
  const Outcome at_limit = parse_every_split(head + "000001\r\nx\r\n0\r\n\r\n", false, limits);
  EXPECT_EQ(at_limit.state, HttpParseState::complete);
  EXPECT_EQ(at_limit.body, "x");
}

TEST(HttpResponseParser, EofBeforeTheEndIsAnError) {
  EXPECT_EQ(run_pieces({}, true).error, HttpParseError::eof_before_response);
  EXPECT_EQ(run_pieces({"HTTP/1.1 200 OK\r\nContent-"}, true).error,
            HttpParseError::eof_in_headers);
  EXPECT_EQ(run_pieces({"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"}, true).error,
            HttpParseError::eof_in_body);
  const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const char* cut :
       {"", "5", "5\r\nab", "5\r\nabcde", "5\r\nabcde\r\n", "0\r\n", "0\r\nT: 1"}) {
    const Outcome o = run_pieces({chunked + cut}, true);
    EXPECT_EQ(o.state, HttpParseState::error) << cut;
    EXPECT_EQ(o.error, HttpParseError::eof_in_body) << cut;
  }
}

}  // namespace
}  // namespace kvprof::client
