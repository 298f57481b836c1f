// bench_loadgen_sink: the user-space CPU per streamed token of kvprof's receive path without
// sockets: a chunked HTTP/1.1 SSE response (the stream server's bytes) through the raw
// transport's HttpResponseParser into the runner's ResponseSink (SSE parsing, chunk scanning,
// token timestamps), in 64 KiB reads as the raw transport does them.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "kvprof/client/http_response_parser.hpp"
#include "kvprof/client/request_record.hpp"
#include "kvprof/util/clock.hpp"

namespace {

using kvprof::client::HttpResponseHandler;
using kvprof::client::HttpResponseParser;
using kvprof::client::RequestRecord;
using kvprof::client::ResponseSink;

// The event the benchmark's stream server sends for token `i` (tests/support/stream_server.hpp).
std::string token_event(uint32_t i) {
  return "data: {\"id\":\"cmpl-kvprof\",\"object\":\"text_completion\",\"created\":0,"
         "\"model\":\"fake\",\"choices\":[{\"index\":0,\"text\":\" tok" +
         std::to_string(i) +
         "\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n";
}

std::string chunked_response(uint32_t n_tokens) {
  std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  const auto add_chunk = [&](const std::string& payload) {
    char size_hex[32];
    std::snprintf(size_hex, sizeof size_hex, "%zx\r\n", payload.size());
    wire += size_hex;
    wire += payload;
    wire += "\r\n";
  };
  for (uint32_t i = 0; i < n_tokens; ++i)
    add_chunk(token_event(i));
  add_chunk("data: [DONE]\n\n");
  return wire + "0\r\n\r\n";
}

struct SinkHandler final : HttpResponseHandler {
  ResponseSink* sink = nullptr;
  void on_response_status(int status) override { sink->on_status(status); }
  bool on_response_body(std::string_view bytes) override {
    return sink->on_data(bytes, kvprof::monotonic_now_ns());
  }
};

constexpr size_t k_read_bytes = 64 * 1024;

void BM_ChunkedStreamThroughSink(benchmark::State& state) {
  const auto n_tokens = static_cast<uint32_t>(state.range(0));
  const std::string wire = chunked_response(n_tokens);
  for (auto _ : state) {
    RequestRecord record;
    record.max_tokens = n_tokens;
    ResponseSink sink(record, kvprof::client::RunClock{}, /*record_token_times=*/true, {});
    SinkHandler handler;
    handler.sink = &sink;
    HttpResponseParser parser;
    size_t used = 0;
    for (size_t pos = 0; pos < wire.size(); pos += k_read_bytes)
      parser.feed(std::string_view(wire).substr(pos, k_read_bytes), handler, used);
    sink.on_done({});
    if (sink.record().tokens_streamed != n_tokens) state.SkipWithError("tokens lost");
    benchmark::DoNotOptimize(sink.record().chunks.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n_tokens);
}
BENCHMARK(BM_ChunkedStreamThroughSink)->Arg(10000);

void BM_HttpParserOnly(benchmark::State& state) {
  const auto n_tokens = static_cast<uint32_t>(state.range(0));
  const std::string wire = chunked_response(n_tokens);
  struct Count final : HttpResponseHandler {
    size_t body_bytes = 0;
    void on_response_status(int) override {}
    bool on_response_body(std::string_view bytes) override {
      body_bytes += bytes.size();
      return true;
    }
  };
  for (auto _ : state) {
    Count handler;
    HttpResponseParser parser;
    size_t used = 0;
    for (size_t pos = 0; pos < wire.size(); pos += k_read_bytes)
      parser.feed(std::string_view(wire).substr(pos, k_read_bytes), handler, used);
    benchmark::DoNotOptimize(handler.body_bytes);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n_tokens);
}
BENCHMARK(BM_HttpParserOnly)->Arg(10000);

}  // namespace

BENCHMARK_MAIN();
