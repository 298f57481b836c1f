// ContinuousBatcher: llama-server's slot scheduler over one libllama context. Each slot is a
// sequence id; a waiting request takes the lowest idle slot; every step() puts the next token of
// each generating slot and a chunk of each admitted prompt into ONE llama_decode (at most n_batch
// tokens), samples greedily (argmax), and frees a slot's KV cells (seq_rm) when its request
// ends or is cancelled. Single-threaded: the caller (LlamaBackend's engine thread, or a test)
// drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kvprof/llama/engine.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::serve {

struct BatcherSettings {
  uint32_t n_slots = 1;     // -np
  uint32_t n_ctx_slot = 0;  // KV cells one slot may use: n_ctx / n_slots, as llama-server
  uint32_t n_batch = 2048;  // most tokens in one llama_decode
};

// What one step did for one request.
struct TaskEvent {
  uint64_t task_id = 0;
  std::vector<int32_t> tokens;  // newly generated tokens (0 or 1); an end-of-generation token
                                // that stops the request is not included
  bool finished = false;
  std::string finish_reason;  // "stop" (end-of-generation token) or "length"
  uint32_t n_prompt_tokens = 0;
  uint32_t n_decoded = 0;   // generated so far
  double prompt_ms = 0;     // from admission to the end of the prompt
  double predicted_ms = 0;  // from the end of the prompt to now
};

// A slot as llama-server's /slots shows it.
struct SlotView {
  int32_t id = 0;
  uint32_t n_ctx = 0;
  bool is_processing = false;
  int64_t id_task = -1;  // the current (or last) task; -1 before the first
  uint32_t n_prompt_tokens = 0;
  uint32_t n_prompt_tokens_processed = 0;
  uint32_t n_decoded = 0;
  int64_t n_remain = -1;
  bool has_next_token = false;
  uint32_t n_past = 0;  // cells this slot holds in the KV cache now
};

// llama-server's counters (server_metrics), cumulated since start.
struct BatcherStats {
  uint64_t prompt_tokens_total = 0;
  double prompt_seconds_total = 0;
  uint64_t tokens_predicted_total = 0;
  double tokens_predicted_seconds_total = 0;
  uint64_t n_decode_total = 0;
  uint64_t n_busy_slots_total = 0;  // busy slots summed over decodes
  uint64_t n_tokens_max = 0;        // largest batch decoded
  uint32_t requests_processing = 0;
  uint32_t requests_deferred = 0;
  uint64_t kv_cells_used = 0;  // sum of n_past over slots
};

class ContinuousBatcher {
 public:
  // Drives `ctx` (of `model`); both must outlive the batcher.
  ContinuousBatcher(const llama::LlamaModel& model, llama::LlamaContext& ctx,
                    BatcherSettings settings);

  // llama-server's refusal of a request that cannot fit a slot: an input error worded like
  // llama.cpp's exceed_context_size_error ("request (N tokens) exceeds the available context
  // size (M tokens), try increasing it"); also refuses an empty prompt.
  [[nodiscard]] Expected<void> check_request(size_t n_prompt_tokens, uint32_t max_tokens) const;

  // Queues a request already checked by check_request(); `task_id` must be unique.
  void add(uint64_t task_id, std::vector<int32_t> prompt, uint32_t max_tokens, bool ignore_eos);

  // Drops a waiting or running request and frees its slot and KV cells; false when unknown.
  bool cancel(uint64_t task_id);

  [[nodiscard]] bool has_work() const;

  // Admits waiting requests into idle slots and runs one llama_decode; the events of the
  // requests that produced a token or finished. Driver error when llama_decode fails (every
  // running request is then finished and its slot freed).
  Expected<std::vector<TaskEvent>> step();

  [[nodiscard]] std::vector<SlotView> slots() const;
  [[nodiscard]] BatcherStats stats() const;
  [[nodiscard]] const BatcherSettings& settings() const { return m_settings; }

 private:
  enum class State : uint8_t { idle, prompt, generating };
  struct Waiting {
    uint64_t task_id;
    std::vector<int32_t> prompt;
    uint32_t max_tokens;
    bool ignore_eos;
  };
  struct Slot {
    int32_t id = 0;
    State state = State::idle;
    int64_t task_id = -1;
    std::vector<int32_t> prompt;
    uint32_t max_tokens = 0;
    bool ignore_eos = false;
    uint32_t n_prompt_done = 0;
    uint32_t n_past = 0;
    uint32_t n_decoded = 0;
    int32_t next_token = 0;
    int64_t start_ns = 0;
    int64_t prompt_done_ns = 0;
  };

  void on_token(Slot& slot, int32_t token, int64_t now_ns, std::vector<TaskEvent>& events);
  TaskEvent event_for(const Slot& slot, int64_t now_ns) const;
  void release(Slot& slot, int64_t now_ns);

  const llama::LlamaModel& m_model;
  llama::LlamaContext& m_ctx;
  BatcherSettings m_settings;
  std::deque<Waiting> m_waiting;
  std::vector<Slot> m_slots;
  BatcherStats m_stats;
};

}  // namespace kvprof::serve
