// parse_request: llama-server's reading of completion and chat requests.
#include "kvprof/serve/request.hpp"

#include <fmt/format.h>

#include <limits>

#include "kvprof/serve/stop_strings.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::serve {

namespace {

using nlohmann::json;

bool all_integers(const json& array) {
  for (const auto& v : array) {
    if (!v.is_number_integer()) return false;
  }
  return true;
}

Expected<std::vector<int32_t>> token_ids(const json& array) {
  std::vector<int32_t> out;
  out.reserve(array.size());
  for (const auto& v : array) {
    const auto id = v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return fail(ErrorKind::input, fmt::format("invalid token id {}", id));
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace

Expected<std::vector<ChatMessage>> chat_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return fail(ErrorKind::input, "'messages' must be a non-empty array");
  }
  std::vector<ChatMessage> out;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("content")) {
      return fail(ErrorKind::input, "each message must be an object with 'content'");
    }
    ChatMessage message;
    // OpenAI requires a role; a message without one is the user's, as most servers read it.
    if (const auto it = m.find("role"); it != m.end() && !it->is_null()) {
      if (!it->is_string()) return fail(ErrorKind::input, "'role' must be a string");
      message.role = it->get<std::string>();
    } else {
      message.role = "user";
    }
    const json& content = m["content"];
    if (content.is_string()) {
      message.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const auto& piece : content) {
        if (piece.is_object() && piece.contains("type") && piece["type"] == "text" &&
            piece.contains("text") && piece["text"].is_string()) {
          message.content += piece["text"].get<std::string>();
        } else {
          return fail(ErrorKind::input, "only text content parts are supported");
        }
      }
    } else if (!content.is_null()) {
      return fail(ErrorKind::input, "'content' must be a string or an array of parts");
    }
    out.push_back(std::move(message));
  }
  return out;
}

Expected<std::vector<int32_t>> prompt_tokens(const json& prompt, const Backend& backend) {
  if (prompt.is_string()) return backend.tokenize(prompt.get<std::string>(), true);
  if (prompt.is_array() && !prompt.empty() && all_integers(prompt)) return token_ids(prompt);
  if (prompt.is_array() && prompt.size() == 1) return prompt_tokens(prompt[0], backend);
  if (prompt.is_array() && prompt.size() > 1 && !all_integers(prompt)) {
    return fail(ErrorKind::input, "kvprof serve takes one prompt per request");
  }
  return fail(ErrorKind::input,
              "\"prompt\" must be a string, a list of tokens, or a list with one of them");
}

// parse_request without the guard against the JSON library's exceptions.
static Expected<ParsedRequest> parse_request_unchecked(std::string_view body, Endpoint endpoint,
                                                       const Backend& backend) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return fail(ErrorKind::input, "the request body is not a JSON object");
  }
  ParsedRequest out;
  if (endpoint == Endpoint::chat) {
    if (!doc.contains("messages")) return fail(ErrorKind::input, "'messages' is required");
    auto messages = chat_messages(doc["messages"]);
    if (!messages) return std::unexpected(messages.error());
    auto text = backend.chat_prompt(*messages);
    if (!text) return std::unexpected(text.error());
    auto tokens = backend.tokenize(*text, true);
    if (!tokens) return std::unexpected(tokens.error());
    out.generate.prompt_tokens = std::move(*tokens);
  } else {
    if (!doc.contains("prompt")) return fail(ErrorKind::input, "\"prompt\" is required");
    auto tokens = prompt_tokens(doc["prompt"], backend);
    if (!tokens) return std::unexpected(tokens.error());
    out.generate.prompt_tokens = std::move(*tokens);
  }
  if (out.generate.prompt_tokens.empty()) {
    return fail(ErrorKind::input, "\"prompt\" must not be empty");
  }
  // n_predict wins over max_tokens, as in llama-server; -1 (or absent) = until the context ends.
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (!doc.contains(key) || doc[key].is_null()) continue;
    if (!doc[key].is_number_integer()) {
      return fail(ErrorKind::input, fmt::format("'{}' must be an integer", key));
    }
    const auto n = doc[key].get<int64_t>();
    if (n == 0 && std::string_view(key) != "n_predict") {
      return fail(ErrorKind::input, fmt::format("'{}' must be at least 1", key));
    }
    out.generate.max_tokens =
        n < 0 ? 0
              : static_cast<uint32_t>(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
  }
  if (auto ok = read_answer_options(doc, k_llama_server_dialect, out); !ok) {
    return std::unexpected(ok.error());
  }
  return out;
}

Expected<void> read_answer_options(const nlohmann::json& doc, const RequestDialect& dialect,
                                   ParsedRequest& out) {
  if (const auto it = doc.find("stream"); it != doc.end() && !it->is_null()) {
    if (it->is_boolean()) {
      out.stream = it->get<bool>();
    } else if (dialect.strict_stream) {
      return fail(ErrorKind::input, "'stream' must be a boolean");
    }
  }
  if (const auto it = doc.find("stream_options"); it != doc.end() && it->is_object()) {
    const auto usage = it->find("include_usage");
    if (usage != it->end() && usage->is_boolean()) out.include_usage = usage->get<bool>();
  }
  if (const auto it = doc.find("ignore_eos"); it != doc.end() && it->is_boolean()) {
    out.generate.ignore_eos = it->get<bool>();
  }
  auto stop = read_stop_strings(doc);
  if (!stop) return std::unexpected(stop.error());
  out.stop = std::move(*stop);
  if (const auto it = doc.find("n"); it != doc.end() && it->is_number_integer()) {
    const auto n = it->get<int64_t>();
    if (dialect.max_choices <= 1 && n != 1) {
      return fail(ErrorKind::input, std::string(dialect.one_choice_message));
    }
    if (n < 1) return fail(ErrorKind::input, fmt::format("n must be at least 1, got {}.", n));
    if (n > dialect.max_choices) {
      return fail(ErrorKind::input,
                  fmt::format("n must be at most {}, got {}.", dialect.max_choices, n));
    }
    out.n = static_cast<uint32_t>(n);
  }
  return {};
}

Expected<ParsedRequest> parse_request(std::string_view body, Endpoint endpoint,
                                      const Backend& backend) {
  return read_json_input("the request body",
                         [&] { return parse_request_unchecked(body, endpoint, backend); });
}

Expected<ParsedRequest> Backend::read_request(std::string_view body, Endpoint endpoint) const {
  return parse_request(body, endpoint, *this);
}

}  // namespace kvprof::serve
