// SimBackend: the SIMULATED vLLM engine as a serve::Backend, so serve-sim and `kvprof serve`
// share one HTTP front end (serve/server.hpp). One engine thread runs sim::Engine's step loop,
// paced by the simulated step time, keeps the live-state file current and hands each request's
// tokens to its sink. It reads requests as vLLM does (its wording, token-ID prompts, the model
// name checked, max_model_len), answers vLLM's GET endpoints (/health, /v1/models, /version,
// /metrics with vLLM V1 names, and a DCGM exporter page) and vLLM's POST /tokenize.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvprof/serve/backend.hpp"
#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/sim_config.hpp"

namespace kvprof::sim {

class SimBackend final : public serve::Backend {
 public:
  // A stopped engine for a validated `config`.
  explicit SimBackend(SimConfig config);
  ~SimBackend() override;
  SimBackend(const SimBackend&) = delete;
  SimBackend& operator=(const SimBackend&) = delete;

  // Writes the idle live-state file (when configured) and starts the engine thread; io error
  // when the file cannot be written.
  Expected<void> start();
  // The engine's counters after its latest step.
  [[nodiscard]] EngineStats engine_stats() const;
  // How many times the live-state file was written.
  [[nodiscard]] uint64_t live_state_writes() const;

  [[nodiscard]] std::string model_id() const override { return m_config.model; }
  [[nodiscard]] Expected<std::vector<int32_t>> tokenize(std::string_view text,
                                                        bool add_special) const override;
  [[nodiscard]] std::string detokenize(const std::vector<int32_t>& tokens) const override;
  [[nodiscard]] Expected<serve::ParsedRequest> read_request(
      std::string_view body, serve::Endpoint endpoint) const override;
  [[nodiscard]] std::optional<serve::HttpReply> admit(
      serve::GenerateRequest& request) const override;
  uint64_t submit(serve::GenerateRequest request, serve::EventSink sink) override;
  void cancel(uint64_t task_id) override;
  [[nodiscard]] std::optional<serve::HttpReply> get(std::string_view path) const override;
  [[nodiscard]] std::optional<serve::HttpReply> post(std::string_view path,
                                                     std::string_view body) const override;
  [[nodiscard]] std::string server_headers() const override;
  [[nodiscard]] serve::HttpReply refusal(int status) const override;
  [[nodiscard]] std::string_view content_type(serve::ContentType type) const override;
  [[nodiscard]] std::string error_body(int status, std::string_view message) const override;
  void stop() override;

 private:
  struct Submission {
    uint64_t id = 0;
    std::vector<uint32_t> prompt_token_ids;
    uint32_t max_tokens = 0;
    double arrival_s = 0;
    serve::EventSink sink;
  };

  void engine_loop();
  [[nodiscard]] double now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  }

  SimConfig m_config;
  std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
  std::thread m_engine_thread;
  std::atomic<bool> m_stopped{false};
  std::atomic<uint64_t> m_next_id{0};

  // Inbox of the engine thread.
  std::mutex m_mu;
  std::condition_variable m_cv;
  std::vector<Submission> m_inbox;
  std::vector<uint64_t> m_aborts;
  bool m_stopping = false;

  // Engine thread only (after start).
  Engine m_engine;
  std::unordered_map<uint64_t, serve::EventSink> m_sinks;

  mutable std::mutex m_stats_mu;
  EngineStats m_engine_stats;  // published after each step
  uint64_t m_live_state_writes = 0;
};

}  // namespace kvprof::sim
