// The OpenAI wire format kvprof's servers speak (see openai_wire.hpp).
#include "kvprof/serve/openai_wire.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace kvprof::serve {

namespace {

using ojson = nlohmann::ordered_json;

const char* openai_error_type(int status) {
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
std::string error_body(int http_status, std::string_view message) {
  return ojson{{"error",
                {{"message", std::string(message)},
                 {"type", openai_error_type(http_status)},
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

std::string ResponseBuilder::role_chunk(uint32_t index) const {
  ojson j{{"id", m_id},
          {"object", "chat.completion.chunk"},
          {"created", m_created},
          {"model", m_model},
          {"choices", ojson::array({{{"index", index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}})}};
  if (m_include_usage) j["usage"] = nullptr;
  return j.dump();
}

std::string ResponseBuilder::text_chunk(std::string_view text, std::string_view finish_reason,
                                        uint32_t index) const {
  ojson choice;
  if (m_chat) {
    choice = {{"index", index},
              {"delta", {{"content", std::string(text)}}},
              {"logprobs", nullptr},
              {"finish_reason", reason_or_null(finish_reason)}};
  } else {
    choice = {{"index", index},
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

std::string ResponseBuilder::full_response(const std::vector<Choice>& choices,
                                           uint32_t prompt_tokens,
                                           uint32_t completion_tokens) const {
  ojson list = ojson::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    if (m_chat) {
      list.push_back(
          {{"index", i},
           {"message",
            {{"role", "assistant"}, {"content", c.text}, {"tool_calls", ojson::array()}}},
           {"logprobs", nullptr},
           {"finish_reason", reason_or_null(c.finish_reason)},
           {"stop_reason", nullptr}});
    } else {
      list.push_back({{"index", i},
                      {"text", c.text},
                      {"logprobs", nullptr},
                      {"finish_reason", reason_or_null(c.finish_reason)},
                      {"stop_reason", nullptr},
                      {"prompt_logprobs", nullptr}});
    }
  }
  return ojson{{"id", m_id},
               {"object", m_chat ? "chat.completion" : "text_completion"},
               {"created", m_created},
               {"model", m_model},
               {"choices", std::move(list)},
               {"usage", usage_json(prompt_tokens, completion_tokens)}}
      .dump();
}

std::string ResponseBuilder::full_response(std::string_view text, std::string_view finish_reason,
                                           uint32_t prompt_tokens,
                                           uint32_t completion_tokens) const {
  return full_response({Choice{std::string(text), std::string(finish_reason)}}, prompt_tokens,
                       completion_tokens);
}

}  // namespace kvprof::serve
