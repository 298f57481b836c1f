// SimServer: the simulated engine (SimBackend) behind the shared HTTP front end (serve::Server).
#include "kvprof/sim/sim_server.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "kvprof/serve/server.hpp"
#include "kvprof/sim/sim_backend.hpp"

namespace kvprof::sim {

class SimServer::Impl {
 public:
  SimConfig config;
  std::shared_ptr<SimBackend> backend;
  std::unique_ptr<serve::Server> server;
};

SimServer::SimServer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

SimServer::~SimServer() {
  stop();
}

Expected<std::unique_ptr<SimServer>> SimServer::start(const SimConfig& config) {
  if (auto ok = validate_sim_config(config); !ok) return std::unexpected(ok.error());
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->backend = std::make_shared<SimBackend>(config);
  serve::ServerOptions options;
  options.host = config.host;
  options.port = config.port;
  options.api_key = config.api_key;
  options.cors_origin = config.cors_origin;
  options.faults = {config.fault, config.fault_rate, config.fault_seed, /*honor_header=*/true};
  auto server = serve::Server::start(impl->backend, options);
  if (!server) return std::unexpected(server.error());
  impl->server = std::move(*server);
  if (auto ok = impl->backend->start(); !ok) {
    impl->server->stop();
    return std::unexpected(ok.error());
  }
  std::unique_ptr<SimServer> sim(new SimServer(std::move(impl)));
  if (!config.quiet) {
    std::fprintf(stderr,
                 "kvprof-sim: SIMULATED vllm engine (no GPU, no model weights) serving '%s' on "
                 "%s: %u KV blocks x %u tokens, max_num_seqs=%u, max_model_len=%u\n",
                 config.model.c_str(), sim->base_url().c_str(), config.num_gpu_blocks,
                 config.block_size, config.max_num_seqs, config.max_model_len);
  }
  return sim;
}

uint16_t SimServer::port() const {
  return m_impl->server->port();
}

std::string SimServer::base_url() const {
  return m_impl->server->base_url();
}

const SimConfig& SimServer::config() const {
  return m_impl->config;
}

void SimServer::stop() {
  if (!m_impl) return;
  // The engine first, as a process that exits: its last live-state says nothing is in use.
  m_impl->backend->stop();
  m_impl->server->stop();
}

SimStats SimServer::stats() const {
  const serve::ServerStats http = m_impl->server->stats();
  SimStats s;
  s.http_requests_total = http.http_requests_total;
  s.completion_requests_total = http.completion_requests_total;
  s.rejected_total = http.rejected_total;
  s.faults_injected_total = http.faults_injected_total;
  s.streams_aborted_total = http.streams_aborted_total;
  s.engine = m_impl->backend->engine_stats();
  s.live_state_writes = m_impl->backend->live_state_writes();
  return s;
}

}  // namespace kvprof::sim
