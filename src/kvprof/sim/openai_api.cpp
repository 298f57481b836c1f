// OpenAI-compatible bodies of the simulator (see openai_api.hpp).
#include "kvprof/sim/openai_api.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/tokenizer.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::sim {

namespace {

using ojson = nlohmann::ordered_json;

const char* error_type(int status) {
  switch (status) {
    case 400:
      return "BadRequestError";
    case 404:
      return "NotFoundError";
    case 429:
      return "RateLimitError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return "InternalServerError";
  }
}

ojson usage_json(uint32_t prompt_tokens, uint32_t completion_tokens) {
  return ojson{{"prompt_tokens", prompt_tokens},
               {"total_tokens", prompt_tokens + completion_tokens},
               {"completion_tokens", completion_tokens},
               {"prompt_tokens_details", nullptr}};
}

ojson reason_or_null(std::string_view reason) {
  return reason.empty() ? ojson(nullptr) : ojson(std::string(reason));
}

}  // namespace

// parse_completion_request without the guard against the JSON library's exceptions.
static Expected<CompletionRequest> parse_completion_request_unchecked(std::string_view body,
                                                                      bool chat,
                                                                      const SimConfig& config) {
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return fail(ErrorKind::input, "the request body is not a JSON object");
  }
  CompletionRequest req;
  req.chat = chat;
  if (const auto m = json.find("model"); m != json.end() && !m->is_null()) {
    if (!m->is_string()) return fail(ErrorKind::input, "'model' must be a string");
    req.model = m->get<std::string>();
    if (req.model != config.model) {
      return fail(ErrorKind::not_found, fmt::format("The model `{}` does not exist.", req.model));
    }
  }
  if (chat) {
    const auto messages = json.find("messages");
    if (messages == json.end()) return fail(ErrorKind::input, "'messages' is required");
    auto tokens = sim_tokenize_chat(*messages);
    if (!tokens) return std::unexpected(tokens.error());
    req.prompt_token_ids = std::move(*tokens);
  } else {
    const auto prompt = json.find("prompt");
    if (prompt == json.end()) return fail(ErrorKind::input, "'prompt' is required");
    auto tokens = sim_tokenize_prompt(*prompt);
    if (!tokens) return std::unexpected(tokens.error());
    req.prompt_token_ids = std::move(*tokens);
  }
  const uint64_t prompt_len = req.prompt_token_ids.size();

  auto max_it = json.find("max_tokens");
  if (chat && (max_it == json.end() || max_it->is_null()))
    max_it = json.find("max_completion_tokens");
  uint64_t max_tokens = 0;
  if (max_it == json.end() || max_it->is_null()) {
    max_tokens = prompt_len < config.max_model_len ? config.max_model_len - prompt_len : 0;
  } else {
    if (!max_it->is_number_integer() || max_it->get<int64_t>() < 0) {
      return fail(ErrorKind::input, "'max_tokens' must be a non-negative integer");
    }
    max_tokens = max_it->get<uint64_t>();
  }
  if (auto ok = check_request_length(config, prompt_len, max_tokens); !ok) {
    return std::unexpected(ok.error());
  }
  req.max_tokens = static_cast<uint32_t>(max_tokens);

  if (const auto s = json.find("stream"); s != json.end() && !s->is_null()) {
    if (!s->is_boolean()) return fail(ErrorKind::input, "'stream' must be a boolean");
    req.stream = s->get<bool>();
  }
  if (const auto so = json.find("stream_options"); so != json.end() && so->is_object()) {
    const auto iu = so->find("include_usage");
    if (iu != so->end() && iu->is_boolean()) req.include_usage = iu->get<bool>();
  }
  if (const auto ie = json.find("ignore_eos"); ie != json.end() && ie->is_boolean()) {
    req.ignore_eos = ie->get<bool>();
  }
  return req;
}

std::string error_body(int http_status, std::string_view message) {
  return ojson{{"error",
                {{"message", std::string(message)},
                 {"type", error_type(http_status)},
                 {"param", nullptr},
                 {"code", http_status}}}}
      .dump();
}

std::string sse_event(std::string_view json) {
  return fmt::format("data: {}\n\n", json);
}

ResponseBuilder::ResponseBuilder(bool chat, std::string model, uint64_t request_number,
                                 int64_t created_unix_s, bool include_usage,
                                 std::string_view id_tag)
    : m_chat(chat),
      m_model(std::move(model)),
      m_id(fmt::format("{}-{}{:016x}", chat ? "chatcmpl" : "cmpl", id_tag, request_number)),
      m_created(created_unix_s),
      m_include_usage(include_usage) {}

std::string ResponseBuilder::role_chunk() const {
  ojson j{{"id", m_id},
          {"object", "chat.completion.chunk"},
          {"created", m_created},
          {"model", m_model},
          {"choices", ojson::array({{{"index", 0},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}})}};
  if (m_include_usage) j["usage"] = nullptr;
  return j.dump();
}

std::string ResponseBuilder::text_chunk(std::string_view text,
                                        std::string_view finish_reason) const {
  ojson choice;
  if (m_chat) {
    choice = {{"index", 0},
              {"delta", {{"content", std::string(text)}}},
              {"logprobs", nullptr},
              {"finish_reason", reason_or_null(finish_reason)}};
  } else {
    choice = {{"index", 0},
              {"text", std::string(text)},
              {"logprobs", nullptr},
              {"finish_reason", reason_or_null(finish_reason)}};
  }
  if (!finish_reason.empty()) choice["stop_reason"] = nullptr;
  ojson j{{"id", m_id},
          {"object", m_chat ? "chat.completion.chunk" : "text_completion"},
          {"created", m_created},
          {"model", m_model},
          {"choices", ojson::array({choice})}};
  if (m_include_usage) j["usage"] = nullptr;
  return j.dump();
}

std::string ResponseBuilder::usage_chunk(uint32_t prompt_tokens, uint32_t completion_tokens) const {
  return ojson{{"id", m_id},
               {"object", m_chat ? "chat.completion.chunk" : "text_completion"},
               {"created", m_created},
               {"model", m_model},
               {"choices", ojson::array()},
               {"usage", usage_json(prompt_tokens, completion_tokens)}}
      .dump();
}

std::string ResponseBuilder::full_response(std::string_view text, std::string_view finish_reason,
                                           uint32_t prompt_tokens,
                                           uint32_t completion_tokens) const {
  ojson choice;
  if (m_chat) {
    choice = {
        {"index", 0},
        {"message",
         {{"role", "assistant"}, {"content", std::string(text)}, {"tool_calls", ojson::array()}}},
        {"logprobs", nullptr},
        {"finish_reason", reason_or_null(finish_reason)},
        {"stop_reason", nullptr}};
  } else {
    choice = {{"index", 0},
              {"text", std::string(text)},
              {"logprobs", nullptr},
              {"finish_reason", reason_or_null(finish_reason)},
              {"stop_reason", nullptr},
              {"prompt_logprobs", nullptr}};
  }
  return ojson{{"id", m_id},
               {"object", m_chat ? "chat.completion" : "text_completion"},
               {"created", m_created},
               {"model", m_model},
               {"choices", ojson::array({choice})},
               {"usage", usage_json(prompt_tokens, completion_tokens)}}
      .dump();
}

Expected<CompletionRequest> parse_completion_request(std::string_view body, bool chat,
                                                     const SimConfig& config) {
  return read_json_input("the request body",
                         [&] { return parse_completion_request_unchecked(body, chat, config); });
}

}  // namespace kvprof::sim
