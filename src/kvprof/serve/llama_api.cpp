// llama-server's JSON and Prometheus text for kvprof serve.
#include "kvprof/serve/llama_api.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvprof::serve {

namespace {

const char* llama_error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 501:
      return "not_supported_error";
    case 503:
      return "unavailable_error";
    default:
      return "server_error";
  }
}

}  // namespace

nlohmann::ordered_json llama_error_json(int status, std::string_view message) {
  return {{"error", {{"code", status}, {"message", message}, {"type", llama_error_type(status)}}}};
}

nlohmann::ordered_json llama_exceed_context_json(std::string_view message, uint32_t n_prompt_tokens,
                                                 uint32_t n_ctx) {
  return {{"error",
           {{"code", 400},
            {"message", message},
            {"type", "exceed_context_size_error"},
            {"n_prompt_tokens", n_prompt_tokens},
            {"n_ctx", n_ctx}}}};
}

ApiShape api_shape(uint32_t build) {
  ApiShape a;
  if (build == 0) return a;
  a.n_past = false;
  a.state_field = build < 4283;           // #10704 (b4283): is_processing
  a.kv_gauges = build < 5441;             // #13660 (b5441) dropped the KV gauges
  a.next_token_array = build >= 6723;     // #16391 (b6723)
  a.prompt_token_counts = build >= 9276;  // #23454 (b9276)
  return a;
}

nlohmann::ordered_json slots_json(const std::vector<SlotView>& slots, const ApiShape& shape) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& s : slots) {
    nlohmann::ordered_json j{{"id", s.id}, {"n_ctx", s.n_ctx}, {"speculative", false}};
    if (shape.state_field) {
      j["state"] = s.is_processing ? 1 : 0;
    } else {
      j["is_processing"] = s.is_processing;
    }
    if (shape.n_past) j["n_past"] = s.n_past;
    if (s.id_task >= 0) {
      j["id_task"] = s.id_task;
      if (shape.prompt_token_counts) {
        j["n_prompt_tokens"] = s.n_prompt_tokens;
        j["n_prompt_tokens_processed"] = s.n_prompt_tokens_processed;
        j["n_prompt_tokens_cache"] = 0;
      }
      j["params"] = {{"temperature", 0.0}, {"top_k", 1}, {"n_predict", -1}};
      const nlohmann::ordered_json next{{"has_next_token", s.has_next_token},
                                        {"has_new_line", false},
                                        {"n_remain", s.n_remain},
                                        {"n_decoded", s.n_decoded}};
      j["next_token"] = shape.next_token_array ? nlohmann::ordered_json::array({next}) : next;
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::string take_utf8(std::string& pending, bool flush) {
  constexpr std::string_view k_replacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    const auto c = static_cast<unsigned char>(pending[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0) {
      out += k_replacement;
      ++i;
      continue;
    }
    if (i + len > pending.size()) {
      bool prefix_ok = true;  // the bytes so far could still become a character
      for (size_t k = i + 1; k < pending.size(); ++k)
        prefix_ok = prefix_ok && (static_cast<unsigned char>(pending[k]) >> 6) == 0x2;
      if (prefix_ok && !flush) break;
      out += k_replacement;
      ++i;
      continue;
    }
    bool ok = true;
    for (size_t k = i + 1; k < i + len; ++k)
      ok = ok && (static_cast<unsigned char>(pending[k]) >> 6) == 0x2;
    if (!ok) {
      out += k_replacement;
      ++i;
      continue;
    }
    out.append(pending, i, len);
    i += len;
  }
  pending.erase(0, i);
  return out;
}

std::string llama_metrics_text(const BatcherStats& s, const ApiShape& shape, uint64_t kv_cells) {
  std::string out;
  auto emit = [&out](std::string_view name, std::string_view help, std::string_view type,
                     double value) {
    out += fmt::format("# HELP llamacpp:{} {}\n# TYPE llamacpp:{} {}\nllamacpp:{} {}\n", name, help,
                       name, type, name, value);
  };
  const double prompt_tps =
      s.prompt_seconds_total > 0
          ? static_cast<double>(s.prompt_tokens_total) / s.prompt_seconds_total
          : 0.0;
  const double predicted_tps =
      s.tokens_predicted_seconds_total > 0
          ? static_cast<double>(s.tokens_predicted_total) / s.tokens_predicted_seconds_total
          : 0.0;
  emit("prompt_tokens_total", "Number of prompt tokens processed.", "counter",
       static_cast<double>(s.prompt_tokens_total));
  emit("prompt_seconds_total", "Prompt process time", "counter", s.prompt_seconds_total);
  emit("tokens_predicted_total", "Number of generation tokens processed.", "counter",
       static_cast<double>(s.tokens_predicted_total));
  emit("tokens_predicted_seconds_total", "Predict process time", "counter",
       s.tokens_predicted_seconds_total);
  emit("n_decode_total", "Total number of llama_decode() calls", "counter",
       static_cast<double>(s.n_decode_total));
  emit("n_tokens_max", "Largest observed n_tokens.", "counter",
       static_cast<double>(s.n_tokens_max));
  emit("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "counter",
       static_cast<double>(s.n_busy_slots_total) /
           std::max(1.0, static_cast<double>(s.n_decode_total)));
  emit("prompt_tokens_seconds", "Average prompt throughput in tokens/s.", "gauge", prompt_tps);
  emit("predicted_tokens_seconds", "Average generation throughput in tokens/s.", "gauge",
       predicted_tps);
  if (shape.kv_gauges) {
    emit("kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", "gauge",
         kv_cells > 0 ? static_cast<double>(s.kv_cells_used) / static_cast<double>(kv_cells) : 0);
    emit("kv_cache_tokens", "KV-cache tokens.", "gauge", static_cast<double>(s.kv_cells_used));
  }
  emit("requests_processing", "Number of requests processing.", "gauge",
       static_cast<double>(s.requests_processing));
  emit("requests_deferred", "Number of requests deferred.", "gauge",
       static_cast<double>(s.requests_deferred));
  return out;
}

}  // namespace kvprof::serve
