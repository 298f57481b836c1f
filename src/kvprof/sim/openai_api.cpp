// The simulator's parsing of OpenAI-compatible requests (see openai_api.hpp).
#include "kvprof/sim/openai_api.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvprof/serve/request.hpp"
#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/tokenizer.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::sim {

namespace {

// vLLM's reading of the answer options: a "stream" that is not a boolean is refused; n choices
// are sampled from the one prompt (each a sequence of the engine, sharing the prompt's cached
// blocks), up to 64 here.
constexpr serve::RequestDialect k_vllm_dialect{true, "", 64};

// parse_completion_request without the guard against the JSON library's exceptions.
Expected<serve::ParsedRequest> parse_completion_request_unchecked(std::string_view body, bool chat,
                                                                  const SimConfig& config) {
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return fail(ErrorKind::input, "the request body is not a JSON object");
  }
  serve::ParsedRequest req;
  if (const auto m = json.find("model"); m != json.end() && !m->is_null()) {
    if (!m->is_string()) return fail(ErrorKind::input, "'model' must be a string");
    const auto& model = m->get_ref<const std::string&>();
    if (model != config.model) {
      return fail(ErrorKind::not_found, fmt::format("The model `{}` does not exist.", model));
    }
  }
  if (chat) {
    const auto messages = json.find("messages");
    if (messages == json.end()) return fail(ErrorKind::input, "'messages' is required");
    auto tokens = sim_tokenize_chat(*messages);
    if (!tokens) return std::unexpected(tokens.error());
    req.generate.prompt_tokens = token_ids_int32(*tokens);
  } else {
    const auto prompt = json.find("prompt");
    if (prompt == json.end()) return fail(ErrorKind::input, "'prompt' is required");
    auto tokens = sim_tokenize_prompt(*prompt);
    if (!tokens) return std::unexpected(tokens.error());
    req.generate.prompt_tokens = token_ids_int32(*tokens);
  }
  const uint64_t prompt_len = req.generate.prompt_tokens.size();

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
  req.generate.max_tokens = static_cast<uint32_t>(max_tokens);
  if (auto ok = serve::read_answer_options(json, k_vllm_dialect, req); !ok) {
    return std::unexpected(ok.error());
  }
  return req;
}

}  // namespace

Expected<serve::ParsedRequest> parse_completion_request(std::string_view body, bool chat,
                                                        const SimConfig& config) {
  return read_json_input("the request body",
                         [&] { return parse_completion_request_unchecked(body, chat, config); });
}

}  // namespace kvprof::sim
