// libFuzzer target for the HTTP/1.1 response parser. The input after two control bytes is a
// byte stream from a server: it is parsed whole, then in pieces cut where the first control byte
// says (0xff: one byte at a time), then cut the same way with a handler that stops after the
// n-th body callback (the second control byte, which also picks small limits). A complete
// keep-alive response is followed by the next one on the same parser after reset(), as the raw
// transport does; at the end of the input the peer closes. Traps when a consumed count leaves
// its piece, a body view is not inside the piece fed, an event follows a terminal state, the
// counters disagree with the events, or the result depends on where the input was cut.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/client/http_response_parser.hpp"

namespace {

using kvprof::client::HttpParseError;
using kvprof::client::HttpParserLimits;
using kvprof::client::HttpParseState;
using kvprof::client::HttpResponseHandler;
using kvprof::client::HttpResponseParser;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool inside(std::string_view part, std::string_view whole) {
  const std::less_equal<const char*> le;
  return le(whole.data(), part.data()) &&
         le(part.data() + part.size(), whole.data() + whole.size());
}

// Checks every event against the piece being fed and the state the driver knows.
struct CheckingHandler final : HttpResponseHandler {
  std::string_view piece;     // every body view must lie inside it
  size_t stop_after = 0;      // 0: never stop; n: refuse the n-th body callback of a response
  bool terminal = false;      // the parser reached a final state: no events may follow
  int n_status = 0;           // on_response_status calls in this response
  size_t n_body_calls = 0;    // in this response
  bool stopped = false;       // this handler returned false
  std::string response_body;  // this response's body

  void next_response() {
    n_status = 0;
    n_body_calls = 0;
    response_body.clear();
  }

  void on_response_status(int http_status) override {
    check(!terminal && !stopped && n_status == 0 && response_body.empty());
    check(http_status >= 200 && http_status <= 599);
    ++n_status;
  }

  bool on_response_body(std::string_view bytes) override {
    check(!terminal && !stopped && n_status == 1 && !bytes.empty() && inside(bytes, piece));
    response_body.append(bytes);
    if (stop_after != 0 && ++n_body_calls == stop_after) {
      stopped = true;
      return false;
    }
    return true;
  }
};

struct Response {
  HttpParseState state = HttpParseState::need_more;
  HttpParseError error = HttpParseError::none;
  int status = 0;
  bool keep_alive = false;
  size_t consumed_bytes = 0;

  bool operator==(const Response&) const = default;
};

struct Outcome {
  std::vector<Response> responses;
  std::string body;  // the bodies of all responses, concatenated
};

// The parser's own view must agree with what the handler saw.
void check_parser(const HttpResponseParser& parser, const CheckingHandler& handler,
                  size_t consumed_bytes) {
  const HttpParseState state = parser.state();
  const bool is_error = state == HttpParseState::error;
  check(is_error == (parser.error_kind() != HttpParseError::none));
  check(is_error == !parser.error().empty());
  check(parser.error().find('\n') == std::string::npos);
  check((state == HttpParseState::stopped) == handler.stopped);
  if (is_error || state == HttpParseState::stopped) check(!parser.keep_alive());
  check(parser.started() == (consumed_bytes > 0));
  check((parser.status() != 0) == (handler.n_status == 1));
  check(parser.body_bytes() == handler.response_body.size());
  check(handler.response_body.size() <= consumed_bytes);
  if (state == HttpParseState::complete && (parser.status() == 204 || parser.status() == 304)) {
    check(handler.response_body.empty());
  }
}

// Parses `input` cut at `cuts` (ascending), responses one after another, then the close.
Outcome run(std::string_view input, const std::vector<size_t>& cuts, const HttpParserLimits& limits,
            size_t stop_after) {
  Outcome out;
  HttpResponseParser parser(limits);
  CheckingHandler handler;
  handler.stop_after = stop_after;
  size_t consumed_bytes = 0;  // by the current response
  const auto finish_response = [&] {
    check_parser(parser, handler, consumed_bytes);
    out.responses.push_back({parser.state(), parser.error_kind(), parser.status(),
                             parser.keep_alive(), consumed_bytes});
    out.body += handler.response_body;
  };
  size_t begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t end = i < cuts.size() ? cuts[i] : input.size();
    std::string_view piece = input.substr(begin, end - begin);
    begin = end;
    while (true) {
      handler.piece = piece;
      size_t used = piece.size() + 1;
      const HttpParseState state = parser.feed(piece, handler, used);
      check(state == parser.state() && used <= piece.size());
      consumed_bytes += used;
      check_parser(parser, handler, consumed_bytes);
      if (state == HttpParseState::need_more) {
        check(used == piece.size());
        break;
      }
      // A final state: more bytes or the close change nothing and report nothing.
      handler.terminal = true;
      size_t again = 1;
      check(parser.feed(piece.substr(used), handler, again) == state && again == 0);
      check(parser.finish_at_eof() == state);
      handler.terminal = false;
      finish_response();
      if (state != HttpParseState::complete || !parser.keep_alive()) return out;
      // The next response on the same connection starts with the bytes left over.
      parser.reset();
      handler.next_response();
      consumed_bytes = 0;
      check(parser.state() == HttpParseState::need_more && !parser.started());
      check(parser.status() == 0 && parser.body_bytes() == 0);
      piece = piece.substr(used);
    }
  }
  const HttpParseState state = parser.finish_at_eof();
  check(state == HttpParseState::complete || state == HttpParseState::error);
  check(!parser.keep_alive());
  finish_response();
  return out;
}

// Up to 7 ascending cut points from `seed`; 0xff cuts between every byte.
std::vector<size_t> make_cuts(uint8_t seed, size_t size) {
  std::vector<size_t> cuts;
  if (seed == 0xff) {
    for (size_t i = 1; i < size; ++i)
      cuts.push_back(i);
    return cuts;
  }
  uint32_t x = seed * 2654435761U + 1;
  size_t at = 0;
  for (int i = 0; i < (seed & 7) + 1 && at <= size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    at += x % (size / 4 + 2);
    cuts.push_back(std::min(at, size));
  }
  return cuts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);
  const uint8_t control = data[1];
  HttpParserLimits limits;
  constexpr size_t k_header_bytes[] = {1024, 64, 256, 4096};
  constexpr size_t k_chunk_line_bytes[] = {4096, 8, 20, 64};
  limits.max_header_bytes = k_header_bytes[(control >> 4) & 3];
  limits.max_header_count = 16;
  limits.max_chunk_line_bytes = k_chunk_line_bytes[(control >> 6) & 3];
  const size_t stop_after = control & 15;

  const Outcome whole = run(input, {}, limits, 0);
  size_t consumed_bytes = 0;
  for (const auto& r : whole.responses)
    consumed_bytes += r.consumed_bytes;
  check(consumed_bytes <= input.size() && whole.body.size() <= consumed_bytes);

  const std::vector<size_t> cuts = make_cuts(data[0], input.size());
  const Outcome split = run(input, cuts, limits, 0);
  check(split.responses == whole.responses && split.body == whole.body);

  if (stop_after != 0) {
    // Stopping ends the stream early: what was delivered is a prefix of the full result.
    const Outcome stopped = run(input, cuts, limits, stop_after);
    check(!stopped.responses.empty() && stopped.responses.size() <= whole.responses.size());
    check(whole.body.starts_with(stopped.body));
    for (size_t i = 0; i + 1 < stopped.responses.size(); ++i)
      check(stopped.responses[i] == whole.responses[i]);
    if (stopped.responses.back().state != HttpParseState::stopped) {
      check(stopped.responses == whole.responses && stopped.body == whole.body);
    }
  }
  return 0;
}
