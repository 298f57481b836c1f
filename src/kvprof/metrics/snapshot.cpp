// The engine of a scrape by its families' prefix, the impossible values, and llama.cpp's /slots
// JSON (each engine's own families are read in engines/<name>/metrics_reader.cpp).
#include "kvprof/metrics/snapshot.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace kvprof::metrics {
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
      summary.n_ctx_max_tokens = std::max(summary.n_ctx_max_tokens, ctx->get<uint64_t>());
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
