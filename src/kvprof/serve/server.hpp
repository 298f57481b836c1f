// Server: the OpenAI-compatible HTTP front end of `kvprof serve` over any Backend. One io_context
// thread serves HTTP/1.1 keep-alive connections (Boost.Beast); the backend's engine thread hands
// it events, which it streams as SSE. Endpoints: POST /v1/completions, /v1/chat/completions,
// /completion (llama-server's native one), /tokenize, /detokenize; every GET the backend serves
// (/health, /v1/models, /props, /slots, /metrics) and engine-specific POST. A client that goes
// away mid-stream frees its request (Backend::cancel). Optional: an API key, injected faults.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvprof/serve/backend.hpp"
#include "kvprof/serve/fault.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;    // 0: a free port
  std::string api_key;  // when set, /v1/ endpoints need "Authorization: Bearer <key>" (401)
  // When set, every answer allows browsers from this origin ("*": any) and OPTIONS answers a
  // CORS preflight; off by default.
  std::string cors_origin;
  FaultOptions faults;  // injected faults (tests of a client's error handling)
};

struct ServerStats {
  uint64_t http_requests_total = 0;
  uint64_t completion_requests_total = 0;
  uint64_t rejected_total = 0;         // answered 4xx
  uint64_t streams_aborted_total = 0;  // client went away, or a reset fault closed it
  uint64_t faults_injected_total = 0;
};

class Server {
 public:
  // Binds host:port and starts the io thread; network error when the bind fails (port in use),
  // usage error for an address that is not one or a CORS origin with control characters.
  static Expected<std::unique_ptr<Server>> start(std::shared_ptr<Backend> backend,
                                                 const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  [[nodiscard]] uint16_t port() const;
  // "http://HOST:PORT/v1".
  [[nodiscard]] std::string base_url() const;
  [[nodiscard]] ServerStats stats() const;
  // Stops accepting and drops open connections (the backend is not stopped). Idempotent.
  void stop();

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace kvprof::serve
