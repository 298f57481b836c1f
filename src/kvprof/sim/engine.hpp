// The simulated engine core: continuous batching like vLLM V1 (waiting queue + running set,
// decodes first then chunked prefills within the token budget), paged KV blocks with
// preemption by recompute, and automatic prefix caching. Single-threaded and clock-free: the
// caller passes the time, so tests drive it step by step.
#pragma once

#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvprof/sim/block_pool.hpp"
#include "kvprof/sim/sim_config.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

// vLLM's time-to-first-token histogram buckets, seconds.
inline constexpr double k_ttft_buckets_s[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                              0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                              20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
inline constexpr size_t k_num_ttft_buckets = std::size(k_ttft_buckets_s);

// A 400 error with vLLM's wording when prompt + max_tokens does not fit max_model_len, or
// max_tokens is 0.
Expected<void> check_request_length(const SimConfig& config, uint64_t prompt_tokens,
                                    uint64_t max_tokens);

// The token the simulated model generates at output position `index` for a prompt whose token
// ids hash to `prompt_seed` (deterministic, like greedy decoding).
uint32_t sim_generated_token(uint64_t prompt_seed, uint32_t index);

// What one step did to one request.
struct RequestOutput {
  uint64_t request_id = 0;
  std::vector<uint32_t> new_token_ids;  // 0 or 1 token per step
  bool finished = false;
  std::string finish_reason;  // "length" when finished
  uint32_t num_prompt_tokens = 0;
  uint32_t num_output_tokens = 0;  // generated so far
  uint32_t num_cached_tokens = 0;  // prompt tokens found in the prefix cache on admission
};

// What schedule() put in the step.
struct StepPlan {
  uint32_t num_prefill_tokens = 0;
  uint32_t num_decode_tokens = 0;
  uint32_t num_scheduled_requests = 0;
  uint32_t num_preempted = 0;
  [[nodiscard]] uint32_t num_tokens() const { return num_prefill_tokens + num_decode_tokens; }
};

struct EngineStats {
  uint32_t num_running = 0;
  uint32_t num_waiting = 0;
  uint32_t num_gpu_blocks = 0;
  uint32_t num_used_blocks = 0;
  uint32_t last_step_tokens = 0;  // tokens in the step being executed (0 when idle)
  uint64_t num_preemptions_total = 0;
  uint64_t prefix_cache_queries_total = 0;  // tokens looked up in the prefix cache
  uint64_t prefix_cache_hits_total = 0;     // of which found cached
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t requests_finished_total = 0;  // finished_reason "length"
  uint64_t requests_aborted_total = 0;
  uint64_t steps_total = 0;
  uint64_t ttft_bucket_counts[k_num_ttft_buckets + 1] = {};  // per bucket, last = +Inf
  double ttft_sum_s = 0;
  uint64_t ttft_count = 0;
  [[nodiscard]] double kv_cache_usage() const {
    return num_gpu_blocks == 0 ? 0.0 : static_cast<double>(num_used_blocks) / num_gpu_blocks;
  }
};

// A running request as the block accounting sees it (for tests and debugging).
struct RunningRequestView {
  uint64_t request_id = 0;
  uint32_t num_tokens = 0;           // prompt + generated
  uint32_t num_computed_tokens = 0;  // tokens whose KV is in the cache
  uint32_t num_blocks = 0;
};

class Engine {
 public:
  // An engine with an empty KV pool of config.num_gpu_blocks blocks.
  explicit Engine(SimConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request (already checked by check_request_length); `request_id` must be unique.
  void add_request(uint64_t request_id, std::vector<uint32_t> prompt_token_ids, uint32_t max_tokens,
                   double arrival_s);

  // Drops a waiting or running request and frees its blocks; false when it is unknown.
  bool abort_request(uint64_t request_id);

  // Picks this step's work (may preempt); complete_step() must follow before the next call.
  StepPlan schedule();

  // Finishes the scheduled step at time `now_s`: advances computed tokens, caches full blocks,
  // emits one token for each request whose prompt is done, frees finished requests.
  std::vector<RequestOutput> complete_step(double now_s);

  // schedule() + complete_step(now_s).
  std::vector<RequestOutput> step(double now_s);

  [[nodiscard]] bool has_unfinished() const;
  [[nodiscard]] EngineStats stats() const;
  [[nodiscard]] std::vector<RunningRequestView> running_requests() const;
  [[nodiscard]] const BlockPool& block_pool() const { return m_pool; }

 private:
  struct Request;
  bool allocate_for(Request& r, uint32_t num_new_tokens);
  void free_blocks(Request& r);
  void preempt(Request& r);
  void update_block_hashes(Request& r);

  SimConfig m_config;
  BlockPool m_pool;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> m_requests;
  std::deque<Request*> m_waiting;
  std::vector<Request*> m_running;  // admission order; preemption takes the last
  std::vector<std::pair<Request*, uint32_t>> m_scheduled;
  EngineStats m_stats;
};

}  // namespace kvprof::sim
