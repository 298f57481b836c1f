// SimServer: the SIMULATED OpenAI-compatible vLLM server on a loopback port: SimBackend behind
// the shared front end (serve::Server). One io_context thread serves HTTP/1.1 keep-alive
// connections (Boost.Beast); one engine thread runs the step loop of sim::Engine and streams
// tokens back. Every answer says it is simulated (header
// X-Kvprof-Simulated: 1, owned_by "kvprof-sim", /version). Usable in-process by tests and by
// `kvprof profile`, or as `kvprof serve-sim`.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (stream, stream_options.
// include_usage, max_tokens, ignore_eos), GET /v1/models, GET /health, POST /tokenize,
// GET /version, GET /metrics (vLLM V1 names). Faults: SimConfig::fault/fault_rate or the
// per-request header "X-Kvprof-Fault: <kind>[;after=N][;seconds=S]" (see parse_fault_spec).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/sim_config.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

struct SimStats {
  uint64_t http_requests_total = 0;        // every HTTP request read
  uint64_t completion_requests_total = 0;  // completion + chat completion requests
  uint64_t rejected_total = 0;             // answered 4xx
  uint64_t faults_injected_total = 0;
  uint64_t streams_aborted_total = 0;  // client went away or a reset fault closed it
  uint64_t live_state_writes = 0;
  EngineStats engine;
};

class SimServer {
 public:
  // Validates `config`, binds host:port (loopback only; port 0 picks a free one), starts the
  // io and engine threads. Errors: usage for a bad config, network when the bind fails.
  static Expected<std::unique_ptr<SimServer>> start(const SimConfig& config);

  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  // The bound port.
  [[nodiscard]] uint16_t port() const;
  // "http://HOST:PORT/v1".
  [[nodiscard]] std::string base_url() const;
  [[nodiscard]] const SimConfig& config() const;
  // Stops both threads; open connections are dropped. Idempotent.
  void stop();
  // A consistent snapshot of the counters and the engine state after the latest step.
  [[nodiscard]] SimStats stats() const;

  class Impl;

 private:
  explicit SimServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace kvprof::sim
