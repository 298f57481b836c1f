// Engine-aware extraction of the canonical snapshot: one table of metric names per engine (as the
// engines' own sources spell them), sums over label sets, and llama.cpp's /slots JSON.
#include "kvprof/metrics/snapshot.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace kvprof::metrics {
namespace {

bool possible(double value) {
  return !std::isnan(value) && value >= 0.0;
}

// Calls `fn` for every sample named exactly `sample_name` whose value is possible: not NaN and not
// negative (every figure kvprof reads is a count, a ratio or a size).
template <class Fn>
void for_each_sample(const Exposition& expo, std::string_view sample_name, Fn&& fn) {
  for (const auto& family : expo.families) {
    if (!sample_name.starts_with(family.name)) continue;
    for (const auto& sample : family.samples) {
      if (sample.name == sample_name && possible(sample.value)) fn(sample);
    }
  }
}

std::optional<double> sum_of(const Exposition& expo, std::string_view sample_name) {
  std::optional<double> total;
  for_each_sample(expo, sample_name,
                  [&](const Sample& s) { total = total.value_or(0.0) + s.value; });
  return total;
}

std::optional<double> mean_of(const Exposition& expo, std::string_view sample_name) {
  double total = 0.0;
  size_t n = 0;
  for_each_sample(expo, sample_name, [&](const Sample& s) {
    total += s.value;
    ++n;
  });
  if (n == 0) return std::nullopt;
  return total / static_cast<double>(n);
}

// The sum for the first of `names` that the exposition reports (newer spelling first).
std::optional<double> sum_first(const Exposition& expo,
                                std::initializer_list<std::string_view> names) {
  for (const auto name : names) {
    if (auto v = sum_of(expo, name)) return v;
  }
  return std::nullopt;
}

std::optional<double> mean_first(const Exposition& expo,
                                 std::initializer_list<std::string_view> names) {
  for (const auto name : names) {
    if (auto v = mean_of(expo, name)) return v;
  }
  return std::nullopt;
}

std::optional<uint64_t> to_count(std::optional<double> value) {
  if (!value || !std::isfinite(*value) || *value < 0.0 || *value > 9.0e18) return std::nullopt;
  return static_cast<uint64_t>(std::llround(*value));
}

std::optional<uint64_t> parse_label_count(const std::string* text) {
  if (text == nullptr || text->empty()) return std::nullopt;
  uint64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

void extract_vllm(const Exposition& expo, MetricsSnapshot& snap) {
  snap.kv_cache_usage = mean_first(expo, {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"});
  snap.num_requests_running = sum_of(expo, "vllm:num_requests_running");
  snap.num_requests_waiting = sum_of(expo, "vllm:num_requests_waiting");
  snap.num_preemptions_total =
      sum_first(expo, {"vllm:num_preemptions_total", "vllm:num_preemptions"});
  snap.prefix_cache_queries_total =
      sum_first(expo, {"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                       "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries"});
  snap.prefix_cache_hits_total =
      sum_first(expo, {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                       "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits"});
  snap.prompt_tokens_total = sum_of(expo, "vllm:prompt_tokens_total");
  snap.generation_tokens_total = sum_of(expo, "vllm:generation_tokens_total");

  // cache_config_info is an info gauge: its labels carry the engine's CacheConfig, one series per
  // engine index. Blocks and capacity are summed over engines.
  std::optional<uint64_t> blocks;
  std::optional<uint64_t> capacity;
  for_each_sample(expo, "vllm:cache_config_info", [&](const Sample& s) {
    const auto n_blocks = parse_label_count(s.label("num_gpu_blocks"));
    const auto block_size = parse_label_count(s.label("block_size"));
    if (block_size && !snap.block_size_tokens) snap.block_size_tokens = block_size;
    if (!n_blocks) return;
    uint64_t sum = 0;
    if (!__builtin_add_overflow(blocks.value_or(0), *n_blocks, &sum)) blocks = sum;
    uint64_t tokens = 0;
    if (block_size && !__builtin_mul_overflow(*n_blocks, *block_size, &tokens) &&
        !__builtin_add_overflow(capacity.value_or(0), tokens, &sum)) {
      capacity = sum;
    }
  });
  snap.num_gpu_blocks = blocks;
  snap.kv_cache_capacity_tokens = capacity;
}

void extract_sglang(const Exposition& expo, MetricsSnapshot& snap) {
  snap.kv_cache_usage = mean_of(expo, "sglang:token_usage");
  snap.kv_cache_used_tokens = sum_of(expo, "sglang:num_used_tokens");
  snap.kv_cache_capacity_tokens = to_count(sum_of(expo, "sglang:max_total_num_tokens"));
  snap.num_requests_running = sum_of(expo, "sglang:num_running_reqs");
  snap.num_requests_waiting = sum_of(expo, "sglang:num_queue_reqs");
  snap.num_retracted_reqs = sum_of(expo, "sglang:num_retracted_reqs");
  snap.num_preemptions_total = sum_of(expo, "sglang:num_retracted_requests_total");
  snap.prompt_tokens_total = sum_of(expo, "sglang:prompt_tokens_total");
  snap.generation_tokens_total = sum_of(expo, "sglang:generation_tokens_total");
}

void extract_tgi(const Exposition& expo, MetricsSnapshot& snap) {
  snap.num_requests_waiting = sum_of(expo, "tgi_queue_size");
  snap.num_requests_running = sum_of(expo, "tgi_batch_current_size");
  snap.batch_max_tokens = sum_of(expo, "tgi_batch_current_max_tokens");
}

void extract_llamacpp(const Exposition& expo, MetricsSnapshot& snap) {
  snap.kv_cache_usage = mean_of(expo, "llamacpp:kv_cache_usage_ratio");
  snap.kv_cache_used_tokens = sum_of(expo, "llamacpp:kv_cache_tokens");
  snap.num_requests_running = sum_of(expo, "llamacpp:requests_processing");
  snap.num_requests_waiting = sum_of(expo, "llamacpp:requests_deferred");
  snap.prompt_tokens_total = sum_of(expo, "llamacpp:prompt_tokens_total");
  snap.generation_tokens_total = sum_of(expo, "llamacpp:tokens_predicted_total");
}

}  // namespace

engines::Engine guess_engine(const Exposition& exposition) {
  const auto rows = engines::engine_rows();
  std::vector<size_t> counts(rows.size(), 0);
  for (const auto& family : exposition.families) {
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].metrics_prefix.empty() && family.name.starts_with(rows[i].metrics_prefix)) {
        ++counts[i];
      }
    }
  }
  engines::Engine best = engines::Engine::unknown;
  size_t best_count = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (counts[i] > best_count) {
      best_count = counts[i];
      best = rows[i].id;
    }
  }
  return best;
}

MetricsSnapshot extract_snapshot(const Exposition& exposition) {
  MetricsSnapshot snap;
  snap.engine = guess_engine(exposition);
  switch (snap.engine) {
    case engines::Engine::vllm:
      extract_vllm(exposition, snap);
      break;
    case engines::Engine::sglang:
      extract_sglang(exposition, snap);
      break;
    case engines::Engine::tgi:
      extract_tgi(exposition, snap);
      break;
    case engines::Engine::llamacpp:
      extract_llamacpp(exposition, snap);
      break;
    case engines::Engine::unknown:
    case engines::Engine::trtllm:
    case engines::Engine::hf:
      break;
  }
  // A share of the KV cache over 100% is not believed.
  if (snap.kv_cache_usage && *snap.kv_cache_usage > 1.0) snap.kv_cache_usage.reset();
  if (snap.kv_cache_usage) snap.kv_cache_source = KvSource::metrics;
  return snap;
}

size_t count_impossible_values(const Exposition& exposition) {
  const std::string_view prefix = engines::engine_row(guess_engine(exposition)).metrics_prefix;
  size_t n = 0;
  for (const auto& family : exposition.families) {
    if (prefix.empty() || !family.name.starts_with(prefix)) continue;
    const bool ratio = family.name.ends_with("_perc") || family.name.ends_with("_ratio") ||
                       family.name.ends_with("token_usage");
    for (const auto& sample : family.samples) {
      if (std::isnan(sample.value)) continue;
      if (sample.value < 0.0 || (ratio && sample.value > 1.0)) ++n;
    }
  }
  return n;
}

std::string_view kv_source_name(KvSource source) {
  switch (source) {
    case KvSource::metrics:
      return "metrics";
    case KvSource::slots:
      return "slots";
    case KvSource::none:
      break;
  }
  return "";
}

namespace {

constexpr uint64_t k_max_slot_tokens = 1ULL << 40;

std::optional<uint64_t> unsigned_field(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  const auto v = it->get<uint64_t>();
  return v <= k_max_slot_tokens ? std::optional<uint64_t>(v) : std::nullopt;
}

// Tokens one slot holds in the KV cache: "n_past" when the server sends it, else its prompt
// tokens plus the tokens decoded (next_token is an array of one object in current llama.cpp,
// an object before).
std::optional<uint64_t> slot_kv_tokens(const nlohmann::json& slot) {
  if (auto past = unsigned_field(slot, "n_past")) return past;
  auto prompt = unsigned_field(slot, "n_prompt_tokens");
  if (!prompt) prompt = unsigned_field(slot, "n_prompt_tokens_processed");
  if (!prompt) return std::nullopt;
  uint64_t decoded = 0;
  if (const auto nt = slot.find("next_token"); nt != slot.end()) {
    const nlohmann::json* first = nt->is_array() && !nt->empty() ? &(*nt)[0] : &*nt;
    if (first->is_object()) decoded = unsigned_field(*first, "n_decoded").value_or(0);
  }
  return *prompt + decoded;
}

}  // namespace

Expected<SlotsSummary> parse_llamacpp_slots(std::string_view json_text) {
  constexpr size_t k_max_slots = 65536;
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(ErrorKind::input, "/slots: not valid JSON");
  if (!doc.is_array()) return fail(ErrorKind::input, "/slots: expected a JSON array of slots");
  if (doc.size() > k_max_slots) {
    return fail(ErrorKind::input, "/slots: more than 65536 slots");
  }
  SlotsSummary summary;
  for (const auto& slot : doc) {
    if (!slot.is_object()) return fail(ErrorKind::input, "/slots: a slot is not an object");
    bool busy = false;
    if (const auto it = slot.find("is_processing"); it != slot.end() && it->is_boolean()) {
      busy = it->get<bool>();
    } else if (const auto st = slot.find("state"); st != slot.end() && st->is_number()) {
      busy = st->get<double>() != 0.0;
    } else {
      return fail(ErrorKind::input, "/slots: a slot has neither is_processing nor state");
    }
    if (const auto ctx = slot.find("n_ctx"); ctx != slot.end() && ctx->is_number_unsigned()) {
      uint64_t sum = 0;
      if (!__builtin_add_overflow(summary.n_ctx_total_tokens, ctx->get<uint64_t>(), &sum)) {
        summary.n_ctx_total_tokens = sum;
      }
    }
    ++summary.slots_total;
    if (busy) ++summary.slots_busy;
    if (const auto held = slot_kv_tokens(slot)) {
      summary.kv_used_tokens = summary.kv_used_tokens.value_or(0) + (busy ? *held : 0);
    }
  }
  return summary;
}

}  // namespace kvprof::metrics
