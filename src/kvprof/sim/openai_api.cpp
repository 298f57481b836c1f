// The simulator's parsing of OpenAI-compatible requests (see openai_api.hpp).
#include "kvprof/sim/openai_api.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvprof/serve/stop_strings.hpp"
#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/tokenizer.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::sim {

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
  auto stop = serve::read_stop_strings(json);
  if (!stop) return std::unexpected(stop.error());
  req.stop = std::move(*stop);
  // vLLM samples n sequences per request; the simulator generates one, and says so rather than
  // answer one choice where n were asked for.
  if (const auto n = json.find("n");
      n != json.end() && n->is_number_integer() && n->get<int64_t>() != 1) {
    return fail(ErrorKind::input, "serve-sim generates one choice per request (n = 1)");
  }
  return req;
}

Expected<CompletionRequest> parse_completion_request(std::string_view body, bool chat,
                                                     const SimConfig& config) {
  return read_json_input("the request body",
                         [&] { return parse_completion_request_unchecked(body, chat, config); });
}

}  // namespace kvprof::sim
