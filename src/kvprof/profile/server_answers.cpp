// Readers of server answers (see server_answers.hpp).
#include "kvprof/profile/server_answers.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvprof/util/strings.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::profile {
namespace {

using nlohmann::json;

constexpr size_t k_max_served_models = 64;
constexpr size_t k_max_model_id_bytes = 512;
constexpr size_t k_max_short_text_bytes = 128;
constexpr size_t k_max_message_bytes = 300;

// A parsed object, or a discarded/other value the callers read as absent (no exception: the
// parser is told not to throw).
json parse_object(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json();
}

const std::string* string_at(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

std::string short_text(std::string_view text, size_t max_bytes) {
  return to_valid_utf8(utf8_prefix(text, max_bytes), /*printable=*/true);
}

std::string first_line(std::string_view text) {
  return one_line(trim(text.substr(0, text.find_first_of("\r\n"))), k_max_message_bytes);
}

}  // namespace

// The largest vocabulary believed (the largest real ones are a few hundred thousand tokens).
constexpr uint64_t k_max_vocab_tokens = 16ULL << 20;

bool read_model_list(std::string_view body, ServerInfo& info) {
  const json j = parse_object(body);
  const auto data = j.is_object() ? j.find("data") : j.end();
  if (!j.is_object() || data == j.end() || !data->is_array()) return false;
  for (const auto& m : *data) {
    if (!m.is_object()) continue;
    const std::string* id = string_at(m, "id");
    // An id kvprof could neither print safely nor send back as JSON is not taken.
    if (id == nullptr || id->size() > k_max_model_id_bytes || has_control_chars(*id) ||
        to_valid_utf8(*id) != *id) {
      continue;
    }
    if (info.models.size() < k_max_served_models) info.models.push_back(*id);
    const auto len = m.find("max_model_len");
    if (len != m.end() && len->is_number_unsigned() &&
        info.max_model_len_tokens.size() < k_max_served_models) {
      info.max_model_len_tokens[*id] = len->get<uint64_t>();
    }
    const auto meta = m.find("meta");
    if (meta != m.end() && meta->is_object() && info.vocab_tokens.size() < k_max_served_models) {
      const auto n_vocab = meta->find("n_vocab");
      if (n_vocab != meta->end() && n_vocab->is_number_integer() && n_vocab->get<int64_t>() > 0 &&
          static_cast<uint64_t>(n_vocab->get<int64_t>()) <= k_max_vocab_tokens) {
        info.vocab_tokens[*id] = static_cast<uint64_t>(n_vocab->get<int64_t>());
      }
    }
    if (const std::string* owner = string_at(m, "owned_by"); info.owned_by.empty() && owner) {
      info.owned_by = short_text(*owner, k_max_short_text_bytes);
    }
  }
  return true;
}

std::string read_server_version(std::string_view body) {
  const json j = parse_object(body);
  const std::string* version = j.is_object() ? string_at(j, "version") : nullptr;
  return version ? short_text(*version, k_max_short_text_bytes) : std::string();
}

namespace {

// default_generation_settings.n_ctx of a parsed /props body, when above 0.
std::optional<uint64_t> slot_context_of(const json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto settings = j.find("default_generation_settings");
  if (settings == j.end() || !settings->is_object()) return std::nullopt;
  const auto n_ctx = settings->find("n_ctx");
  if (n_ctx == settings->end() || !n_ctx->is_number_unsigned() || n_ctx->get<uint64_t>() == 0) {
    return std::nullopt;
  }
  return n_ctx->get<uint64_t>();
}

}  // namespace

std::optional<PropsFacts> read_props_facts(std::string_view body) {
  constexpr size_t k_max_buffers = 64;
  const json j = parse_object(body);
  if (!j.is_object() || (!j.contains("build_info") && !j.contains("default_generation_settings"))) {
    return std::nullopt;
  }
  PropsFacts facts;
  if (const std::string* build = string_at(j, "build_info")) {
    facts.build = short_text(*build, k_max_short_text_bytes);
  }
  if (const std::string* path = string_at(j, "model_path"); path && path->size() <= 4096) {
    facts.model_path = *path;
  }
  if (const auto slots = j.find("total_slots"); slots != j.end() && slots->is_number_unsigned() &&
                                                slots->get<uint64_t>() >= 1 &&
                                                slots->get<uint64_t>() <= 4096) {
    facts.total_slots = static_cast<uint32_t>(slots->get<uint64_t>());
  }
  facts.slot_context_tokens = slot_context_of(j);
  const auto kvprof = j.find("kvprof");
  if (kvprof == j.end() || !kvprof->is_object()) return facts;
  if (const auto n_ctx = kvprof->find("n_ctx");
      n_ctx != kvprof->end() && n_ctx->is_number_unsigned() && n_ctx->get<uint64_t>() > 0) {
    facts.context_tokens = n_ctx->get<uint64_t>();
  }
  const auto memory = kvprof->find("memory");
  if (memory == kvprof->end() || !memory->is_object()) return facts;
  const auto buffers = memory->find("buffers");
  if (buffers == memory->end() || !buffers->is_array() || buffers->size() > k_max_buffers) {
    return facts;
  }
  enginelog::EngineLogReport report;
  report.engine = engines::Engine::llamacpp;
  const auto add = [&](const json& buffer, const char* key, enginelog::Component component) {
    const auto it = buffer.find(key);
    const std::string* type = string_at(buffer, "buffer_type");
    if (it == buffer.end() || !it->is_number_unsigned() || it->get<uint64_t>() == 0 || !type) {
      return;
    }
    enginelog::MemoryFigure f;
    f.component = component;
    f.device = short_text(*type, k_max_short_text_bytes);
    f.size.bytes = it->get<uint64_t>();
    f.size.text = fmt::format("{} bytes", f.size.bytes);
    f.source = {0, fmt::format("/props kvprof.memory {} {}", f.device, key)};
    report.figures.push_back(std::move(f));
  };
  for (const auto& buffer : *buffers) {
    if (!buffer.is_object()) continue;
    add(buffer, "model_bytes", enginelog::Component::weights);
    add(buffer, "context_bytes", enginelog::Component::kv_cache);
    add(buffer, "compute_bytes", enginelog::Component::compute);
  }
  if (!report.figures.empty()) facts.buffers = std::move(report);
  return facts;
}

std::optional<uint64_t> read_tokenize_count(std::string_view body) {
  const json j = parse_object(body);
  if (!j.is_object()) return std::nullopt;
  if (const auto count = j.find("count"); count != j.end() && count->is_number_unsigned()) {
    return count->get<uint64_t>();
  }
  if (const auto tokens = j.find("tokens"); tokens != j.end() && tokens->is_array()) {
    return tokens->size();
  }
  return std::nullopt;
}

std::string server_message(std::string_view body) {
  const json j = parse_object(body);
  if (j.is_object()) {
    for (const char* key : {"error", "detail", "message"}) {
      const auto it = j.find(key);
      if (it == j.end()) continue;
      if (it->is_string()) return first_line(it->get_ref<const std::string&>());
      if (it->is_object()) {
        if (const std::string* m = string_at(*it, "message")) return first_line(*m);
      }
    }
  }
  return first_line(body);
}

}  // namespace kvprof::profile
