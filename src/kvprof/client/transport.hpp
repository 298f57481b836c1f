// The Transport interface: starts streaming HTTP POSTs and drives them from one event loop, so
// response handling is tested with a scripted fake and runs for real on kvprof's own HTTP/1.1
// client (http://) or libcurl's multi API (https://, or on request).
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/clock.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::client {

// How a transfer ended, as far as the transport can tell (HTTP statuses and stream content are
// judged by the sink).
enum class TransportOutcome {
  ok,         // the server ended the response normally
  connect,    // no connection (refused, unreachable, DNS, connect timeout)
  reset,      // the connection broke after it was made (reset, closed early, send/recv error)
  timeout,    // the whole-request timeout passed
  aborted,    // the sink asked to stop (its on_data returned false)
  cancelled,  // cancel() was called
  other,      // anything else the transport reports
};

struct TransportResult {
  TransportOutcome outcome = TransportOutcome::ok;
  std::string message;  // one line; empty for ok
  // When the bytes that ended the transfer reached this host (monotonic_now_ns() clock); 0 when
  // the transport does not know (the sink then takes the time of on_done).
  int64_t arrival_ns = 0;
};

// What a transport has done so far.
struct TransportCounters {
  uint64_t reads = 0;                     // reads (or libcurl writes) that delivered bytes
  uint64_t kernel_timestamped_reads = 0;  // of those, stamped with the kernel's receive time
};

struct HttpRequest {
  std::string url;
  std::string body;                  // sent as application/json
  std::vector<std::string> headers;  // extra "Name: value" lines (e.g. Authorization)
  double timeout_s = 600.0;          // whole request, 0 = none
  double connect_timeout_s = 30.0;
};

// Receives one transfer's events, all on the thread that calls Transport::poll().
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Called once, before any on_data, when the response status line has arrived.
  virtual void on_status(int http_status) = 0;
  // A piece of the response body that reached this host at `arrival_ns` (monotonic_now_ns()
  // clock: the kernel's receive time of its newest byte where the transport has it, else when
  // it was read); return false to abort the transfer.
  virtual bool on_data(std::string_view bytes, int64_t arrival_ns) = 0;
  // Called exactly once when the transfer ends for any reason; the sink may be destroyed after.
  virtual void on_done(const TransportResult& result) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Starts `request`, reporting to `sink` (which must live until its on_done); returns a handle
  // for cancel(). A transfer that cannot even start still ends through sink->on_done.
  virtual uint64_t start(HttpRequest request, StreamSink* sink) = 0;
  // Ends the transfer `handle` now; its sink gets on_done(cancelled). Unknown handles are ignored.
  virtual void cancel(uint64_t handle) = 0;
  // Waits up to `timeout_ms` for network activity and delivers it to the sinks; returns the
  // number of transfers still running.
  virtual size_t poll(int timeout_ms) = 0;
  // Makes a poll() that is waiting return early; safe to call from any thread.
  virtual void wakeup() = 0;
  // Counts of what this transport has read so far.
  [[nodiscard]] virtual TransportCounters counters() const = 0;
};

struct CurlOptions {
  size_t max_connections = 0;  // connection cache size; 0 = sized to the transfers in flight
};

// The libcurl multi transport: one event loop (the caller's thread), HTTP/1.1 keep-alive, many
// concurrent streams. Returns nullptr only when libcurl cannot be initialised.
std::unique_ptr<Transport> make_curl_transport(const CurlOptions& options = {});

struct RawOptions {
  // While data flows, sockets are read at most once per this interval (0: on every arrival), so
  // one read takes all a stream's tokens that came meanwhile. Arrival times stay the kernel's
  // receive times: a read of one event is timed exactly; events sharing a read share the time
  // of the newest.
  uint32_t read_interval_us = 0;
  size_t max_idle_connections_per_host = 0;  // kept-alive idle connections; 0 = no bound
  size_t recv_buffer_bytes = 64 * 1024;      // one recv() reads at most this much
  size_t max_header_bytes = 64 * 1024;       // status line + headers of one response
};

// kvprof's own HTTP/1.1 client for http:// URLs (other URLs end with outcome connect):
// non-blocking sockets on one edge-triggered epoll (the caller's thread), keep-alive connections
// pooled per host:port, per-request timeouts, data stamped with the kernel's receive time
// (SO_TIMESTAMPNS). Returns nullptr only when epoll or eventfd fail.
std::unique_ptr<Transport> make_raw_transport(const RawOptions& options = {});

enum class TransportKind {
  automatic,  // raw for http:// without a proxy in the environment, curl otherwise
  raw,
  curl,
};

// "auto" / "raw" / "curl".
std::string_view transport_kind_name(TransportKind kind);
// Parses "auto", "raw" or "curl"; an input error otherwise.
Expected<TransportKind> parse_transport_kind(std::string_view text);
// The kind that `kind` resolves to for requests to `endpoint`: automatic becomes
// $KVPROF_TRANSPORT when that names raw or curl, else raw for an http:// URL with no proxy
// variable set (or a loopback host), else curl.
TransportKind resolve_transport_kind(TransportKind kind, std::string_view endpoint);
// A transport of kind resolve_transport_kind(kind, endpoint) (`raw` configures the raw one);
// nullptr when it cannot be initialised.
std::unique_ptr<Transport> make_transport(TransportKind kind, std::string_view endpoint,
                                          const RawOptions& raw = {});
// make_transport(TransportKind::automatic, endpoint): what commands should use.
std::unique_ptr<Transport> make_default_transport(std::string_view endpoint);

}  // namespace kvprof::client
