// The bench grid and the defaults kvprof fills in.
#include "kvprof/bench/bench_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace kvprof::bench {

uint64_t BenchCondition::kv_tokens() const {
  uint64_t total = 0;
  for (uint32_t p : prompt_tokens)
    total += p + gen_tokens;
  return total;
}

std::vector<BenchCondition> make_conditions(const BenchConfig& config) {
  std::vector<BenchCondition> out;
  auto add = [&](uint32_t c, std::vector<uint32_t> prompts, std::string label) {
    BenchCondition cond;
    cond.index = static_cast<uint32_t>(out.size());
    cond.concurrency = c;
    cond.prompt_tokens = std::move(prompts);
    cond.gen_tokens = config.gen_tokens;
    cond.label = std::move(label);
    out.push_back(std::move(cond));
  };
  if (config.mixed) {
    const auto [short_toks, long_toks] = *config.mixed;
    for (uint32_t c : config.concurrencies) {
      std::vector<uint32_t> prompts(c, long_toks);
      for (uint32_t i = 0; i < (c + 1) / 2; ++i)
        prompts[i] = short_toks;
      add(c, std::move(prompts), fmt::format("c{} mixed {}/{}", c, short_toks, long_toks));
    }
    return out;
  }
  for (uint32_t p : config.prompt_tokens) {
    for (uint32_t c : config.concurrencies)
      add(c, std::vector<uint32_t>(c, p), fmt::format("c{} p{}", c, p));
  }
  return out;
}

llama::LlamaSettings settings_for(const BenchConfig& config, const BenchCondition& c) {
  llama::LlamaSettings s = config.engine;
  if (config.context_per_condition()) {
    s.n_seq_max = c.concurrency;
    s.n_ctx = static_cast<uint32_t>((c.kv_tokens() + 255) / 256 * 256);
  }
  return s;
}

Expected<void> resolve_defaults(BenchConfig& config) {
  if (config.concurrencies.empty() || config.prompt_tokens.empty()) {
    return fail(ErrorKind::usage, "--concurrency and --prompt-toks need at least one value");
  }
  for (uint32_t c : config.concurrencies) {
    if (c == 0 || c > 1024) return fail(ErrorKind::usage, "--concurrency values must be 1..1024");
  }
  for (uint32_t p : config.prompt_tokens) {
    if (p == 0) return fail(ErrorKind::usage, "--prompt-toks values must be at least 1");
  }
  if (config.gen_tokens == 0) return fail(ErrorKind::usage, "--gen-toks must be at least 1");
  const auto conditions = make_conditions(config);
  uint64_t most_tokens = 0;
  uint32_t most_seqs = 0;
  for (const auto& c : conditions) {
    most_tokens = std::max(most_tokens, c.kv_tokens());
    most_seqs = std::max(most_seqs, c.concurrency);
  }
  auto& e = config.engine;
  if (!config.parallel_from_user) e.n_seq_max = most_seqs;
  if (!config.ctx_from_user) e.n_ctx = static_cast<uint32_t>((most_tokens + 255) / 256 * 256);
  if (most_seqs > e.n_seq_max) {
    return fail(ErrorKind::usage, fmt::format("--concurrency {} needs -np {} or more (it is {})",
                                              most_seqs, most_seqs, e.n_seq_max));
  }
  // Without a unified KV buffer each sequence gets n_ctx / n_seq_max cells.
  for (const auto& c : conditions) {
    const uint64_t longest =
        *std::max_element(c.prompt_tokens.begin(), c.prompt_tokens.end()) + c.gen_tokens;
    const uint64_t per_seq = e.kv_unified ? e.n_ctx : e.n_ctx / std::max(1U, e.n_seq_max);
    if (c.kv_tokens() > e.n_ctx || longest > per_seq) {
      return fail(ErrorKind::usage,
                  fmt::format("condition {} holds {} tokens ({} at most per sequence) but the "
                              "context has {} cells{}; raise -c",
                              c.label, c.kv_tokens(), longest, e.n_ctx,
                              e.kv_unified ? "" : fmt::format(" ({} per sequence)", per_seq)));
    }
  }
  return {};
}

}  // namespace kvprof::bench
