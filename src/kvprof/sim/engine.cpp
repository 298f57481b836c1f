// Engine: the vLLM-V1-like scheduler over the simulated paged KV cache.
#include "kvprof/sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvprof::sim {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint32_t ceil_div(uint64_t a, uint32_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

}  // namespace

struct Engine::Request {
  uint64_t id = 0;
  std::vector<uint32_t> tokens;  // prompt, then generated tokens
  uint32_t num_prompt_tokens = 0;
  uint32_t max_tokens = 0;
  uint32_t num_computed = 0;
  std::vector<BlockId> blocks;
  std::vector<uint64_t> block_hashes;  // one per full block of `tokens`
  uint32_t num_cached_blocks = 0;      // blocks[0, n) already offered to the prefix cache
  uint64_t prompt_seed = 0;
  double arrival_s = 0;
  bool first_token_emitted = false;
  bool admitted_once = false;
  bool finished = false;
  uint32_t num_cached_tokens = 0;
  [[nodiscard]] uint32_t num_tokens() const { return static_cast<uint32_t>(tokens.size()); }
  [[nodiscard]] uint32_t num_output() const { return num_tokens() - num_prompt_tokens; }
};

Expected<void> check_request_length(const SimConfig& config, uint64_t prompt_tokens,
                                    uint64_t max_tokens) {
  if (max_tokens == 0) {
    return fail(ErrorKind::input, "max_tokens must be at least 1, got 0.");
  }
  if (prompt_tokens == 0) return fail(ErrorKind::input, "The prompt must not be empty.");
  if (prompt_tokens >= config.max_model_len) {
    return fail(ErrorKind::input,
                fmt::format("This model's maximum context length is {} tokens. However, your "
                            "request has {} input tokens. Please reduce the length of the input "
                            "messages.",
                            config.max_model_len, prompt_tokens));
  }
  if (prompt_tokens + max_tokens > config.max_model_len) {
    return fail(ErrorKind::input,
                fmt::format("'max_tokens' or 'max_completion_tokens' is too large: {}. This "
                            "model's maximum context length is {} tokens and your request has {} "
                            "input tokens ({} > {} - {}).",
                            max_tokens, config.max_model_len, prompt_tokens, max_tokens,
                            config.max_model_len, prompt_tokens));
  }
  return {};
}

uint32_t sim_generated_token(uint64_t prompt_seed, uint32_t index) {
  return 256 + static_cast<uint32_t>(splitmix64(prompt_seed ^ (uint64_t{index} << 32)) % 31744);
}

Engine::Engine(SimConfig config)
    : m_config(std::move(config)), m_pool(m_config.num_gpu_blocks, m_config.enable_prefix_caching) {
  m_stats.num_gpu_blocks = m_config.num_gpu_blocks;
}

Engine::~Engine() = default;

void Engine::add_request(uint64_t request_id, std::vector<uint32_t> prompt_token_ids,
                         uint32_t max_tokens, double arrival_s) {
  auto r = std::make_unique<Request>();
  r->id = request_id;
  r->num_prompt_tokens = static_cast<uint32_t>(prompt_token_ids.size());
  r->prompt_seed = block_hash(0x5eed, prompt_token_ids);
  r->tokens = std::move(prompt_token_ids);
  r->tokens.reserve(r->tokens.size() + max_tokens);
  r->max_tokens = max_tokens;
  r->arrival_s = arrival_s;
  m_waiting.push_back(r.get());
  m_requests[request_id] = std::move(r);
}

bool Engine::abort_request(uint64_t request_id) {
  const auto it = m_requests.find(request_id);
  if (it == m_requests.end()) return false;
  Request* r = it->second.get();
  std::erase(m_running, r);
  std::erase(m_waiting, r);
  std::erase_if(m_scheduled, [r](const auto& s) { return s.first == r; });
  free_blocks(*r);
  m_requests.erase(it);
  ++m_stats.requests_aborted_total;
  return true;
}

void Engine::update_block_hashes(Request& r) {
  const uint32_t bs = m_config.block_size;
  while ((r.block_hashes.size() + 1) * bs <= r.tokens.size()) {
    const size_t start = r.block_hashes.size() * bs;
    const uint64_t parent = r.block_hashes.empty() ? 0 : r.block_hashes.back();
    r.block_hashes.push_back(
        block_hash(parent, std::span<const uint32_t>(r.tokens).subspan(start, bs)));
  }
}

bool Engine::allocate_for(Request& r, uint32_t num_new_tokens) {
  const uint32_t want = ceil_div(uint64_t{r.num_computed} + num_new_tokens, m_config.block_size);
  const uint32_t have = static_cast<uint32_t>(r.blocks.size());
  if (want <= have) return true;
  if (want - have > m_pool.num_free()) return false;
  for (uint32_t i = have; i < want; ++i)
    r.blocks.push_back(*m_pool.allocate());
  return true;
}

void Engine::free_blocks(Request& r) {
  // Reverse order, as vLLM does, so a request's tail blocks are evicted before its prefix.
  for (auto it = r.blocks.rbegin(); it != r.blocks.rend(); ++it)
    m_pool.release(*it);
  r.blocks.clear();
  r.num_cached_blocks = 0;
}

void Engine::preempt(Request& r) {
  free_blocks(r);
  r.num_computed = 0;
  m_waiting.push_front(&r);
  ++m_stats.num_preemptions_total;
}

StepPlan Engine::schedule() {
  StepPlan plan;
  m_scheduled.clear();
  uint32_t budget = m_config.max_num_batched_tokens;
  const uint32_t bs = m_config.block_size;

  // Running requests first (decodes and unfinished prefill chunks), in admission order.
  size_t i = 0;
  while (i < m_running.size() && budget > 0) {
    Request* r = m_running[i];
    const uint32_t num_new = std::min(r->num_tokens() - r->num_computed, budget);
    bool scheduled = false;
    for (;;) {
      if (allocate_for(*r, num_new)) {
        scheduled = true;
        break;
      }
      Request* victim = m_running.back();  // the most recently admitted
      m_running.pop_back();
      preempt(*victim);
      ++plan.num_preempted;
      if (victim == r) break;
    }
    if (!scheduled) break;
    m_scheduled.emplace_back(r, num_new);
    budget -= num_new;
    const bool is_decode = r->first_token_emitted && r->num_computed + 1 == r->num_tokens();
    (is_decode ? plan.num_decode_tokens : plan.num_prefill_tokens) += num_new;
    ++i;
  }

  // Then new (or preempted) requests, first come first served, unless this step preempted.
  while (plan.num_preempted == 0 && !m_waiting.empty() && budget > 0 &&
         m_running.size() < m_config.max_num_seqs) {
    Request* r = m_waiting.front();
    std::vector<BlockId> hits;
    if (m_config.enable_prefix_caching) {
      update_block_hashes(*r);
      // At least the last token is always computed, so a full hit still leaves work.
      const size_t max_hit_blocks =
          std::min<size_t>((r->num_tokens() - 1) / bs, r->block_hashes.size());
      for (size_t k = 0; k < max_hit_blocks; ++k) {
        const auto b = m_pool.lookup(r->block_hashes[k]);
        if (!b) break;
        hits.push_back(*b);
      }
    }
    const uint32_t hit_tokens = static_cast<uint32_t>(hits.size()) * bs;
    const uint32_t num_new = std::min(r->num_tokens() - hit_tokens, budget);
    const uint32_t blocks_needed =
        ceil_div(uint64_t{hit_tokens} + num_new, bs) - static_cast<uint32_t>(hits.size());
    const auto evictable_hits = static_cast<uint32_t>(std::count_if(
        hits.begin(), hits.end(), [&](BlockId b) { return m_pool.ref_count(b) == 0; }));
    if (uint64_t{blocks_needed} + evictable_hits > m_pool.num_free()) break;

    for (BlockId b : hits)
      m_pool.touch(b);
    r->blocks = hits;
    r->num_cached_blocks = static_cast<uint32_t>(hits.size());
    r->num_computed = hit_tokens;
    for (uint32_t k = 0; k < blocks_needed; ++k)
      r->blocks.push_back(*m_pool.allocate());
    if (m_config.enable_prefix_caching) {
      m_stats.prefix_cache_queries_total += r->num_tokens();
      m_stats.prefix_cache_hits_total += hit_tokens;
    }
    if (!r->admitted_once) r->num_cached_tokens = hit_tokens;
    r->admitted_once = true;
    m_waiting.pop_front();
    m_running.push_back(r);
    m_scheduled.emplace_back(r, num_new);
    budget -= num_new;
    plan.num_prefill_tokens += num_new;
  }
  plan.num_scheduled_requests = static_cast<uint32_t>(m_scheduled.size());
  m_stats.last_step_tokens = plan.num_tokens();
  return plan;
}

std::vector<RequestOutput> Engine::complete_step(double now_s) {
  std::vector<RequestOutput> outputs;
  const uint32_t bs = m_config.block_size;
  bool any_finished = false;
  for (auto& [r, num_new] : m_scheduled) {
    r->num_computed += num_new;
    update_block_hashes(*r);
    const uint32_t full_blocks = r->num_computed / bs;
    for (uint32_t k = r->num_cached_blocks; k < full_blocks && k < r->blocks.size(); ++k) {
      m_pool.cache_block(r->blocks[k], r->block_hashes[k]);
    }
    r->num_cached_blocks = std::max(r->num_cached_blocks, full_blocks);
    if (r->num_computed < r->num_tokens()) continue;  // prefill not done yet

    const uint32_t token = sim_generated_token(r->prompt_seed, r->num_output());
    r->tokens.push_back(token);
    ++m_stats.generation_tokens_total;
    if (!r->first_token_emitted) {
      r->first_token_emitted = true;
      m_stats.prompt_tokens_total += r->num_prompt_tokens;
      const double ttft_s = std::max(0.0, now_s - r->arrival_s);
      size_t bucket = 0;
      while (bucket < k_num_ttft_buckets && ttft_s > k_ttft_buckets_s[bucket])
        ++bucket;
      ++m_stats.ttft_bucket_counts[bucket];
      m_stats.ttft_sum_s += ttft_s;
      ++m_stats.ttft_count;
    }
    RequestOutput out;
    out.request_id = r->id;
    out.new_token_ids.push_back(token);
    out.num_prompt_tokens = r->num_prompt_tokens;
    out.num_output_tokens = r->num_output();
    out.num_cached_tokens = r->num_cached_tokens;
    if (r->num_output() >= r->max_tokens) {
      out.finished = true;
      out.finish_reason = "length";
      r->finished = true;
      any_finished = true;
      free_blocks(*r);
      ++m_stats.requests_finished_total;
    }
    outputs.push_back(std::move(out));
  }
  m_scheduled.clear();
  if (any_finished) {
    std::erase_if(m_running, [](const Request* r) { return r->finished; });
    std::erase_if(m_requests, [](const auto& kv) { return kv.second->finished; });
  }
  ++m_stats.steps_total;
  return outputs;
}

std::vector<RequestOutput> Engine::step(double now_s) {
  schedule();
  return complete_step(now_s);
}

bool Engine::has_unfinished() const {
  return !m_requests.empty();
}

EngineStats Engine::stats() const {
  EngineStats s = m_stats;
  s.num_running = static_cast<uint32_t>(m_running.size());
  s.num_waiting = static_cast<uint32_t>(m_waiting.size());
  s.num_gpu_blocks = m_pool.num_blocks();
  s.num_used_blocks = m_pool.num_used();
  return s;
}

std::vector<RunningRequestView> Engine::running_requests() const {
  std::vector<RunningRequestView> views;
  views.reserve(m_running.size());
  for (const Request* r : m_running) {
    views.push_back(
        {r->id, r->num_tokens(), r->num_computed, static_cast<uint32_t>(r->blocks.size())});
  }
  return views;
}

}  // namespace kvprof::sim
