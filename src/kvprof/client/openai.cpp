// OpenAI-compatible request bodies and streamed-chunk parsing.
#include "kvprof/client/openai.hpp"

#include "kvprof/client/chunk_scan.hpp"
#include "kvprof/util/utf8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kvprof::client {

using nlohmann::json;

std::string_view api_kind_name(ApiKind api) {
  return api == ApiKind::chat ? "chat" : "completions";
}

Expected<ApiKind> parse_api_kind(std::string_view text) {
  if (text == "completions") return ApiKind::completions;
  if (text == "chat") return ApiKind::chat;
  return fail(ErrorKind::input,
              fmt::format("unknown API '{}' (expected completions or chat)", text));
}

std::string_view api_path(ApiKind api) {
  return api == ApiKind::chat ? "/v1/chat/completions" : "/v1/completions";
}

std::string endpoint_url(std::string_view base_url, ApiKind api) {
  std::string url(base_url);
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  if (url.ends_with("/completions")) return url;  // already a full endpoint
  if (url.ends_with("/v1")) url.resize(url.size() - 3);
  return url + std::string(api_path(api));
}

namespace {

json common_body(const GenerationParams& params) {
  json body = json::object();
  if (!params.model.empty()) body["model"] = params.model;
  body["max_tokens"] = params.max_tokens;
  body["temperature"] = params.temperature;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (params.ignore_eos) body["ignore_eos"] = true;
  return body;
}

StreamChunk error_chunk(const json& error) {
  StreamChunk chunk;
  chunk.kind = StreamChunk::Kind::error;
  if (error.is_object()) {
    if (auto it = error.find("message"); it != error.end() && it->is_string()) {
      chunk.error_message = one_line(it->get<std::string>());
    } else {
      chunk.error_message = one_line(error.dump());
    }
    if (auto it = error.find("code"); it != error.end() && it->is_number_integer()) {
      chunk.error_code = it->get<int>();
    }
  } else if (error.is_string()) {
    chunk.error_message = one_line(error.get<std::string>());
  } else {
    chunk.error_message = one_line(error.dump());
  }
  if (chunk.error_message.empty()) chunk.error_message = "the server sent an error";
  return chunk;
}

// Tokens a chunk carries: 1 for non-empty text, or the growth of a continuous usage count.
uint32_t tokens_in_chunk(const StreamChunk& chunk, bool has_text_field,
                         uint64_t completion_tokens_so_far) {
  if (!has_text_field) return 0;
  if (chunk.usage && chunk.usage->completion_tokens > completion_tokens_so_far) {
    // Bounded, so a lying server cannot make one chunk stand for billions of tokens.
    return static_cast<uint32_t>(std::min<uint64_t>(
        chunk.usage->completion_tokens - completion_tokens_so_far, k_max_tokens_per_chunk));
  }
  return chunk.text.empty() ? 0 : 1;
}

}  // namespace

std::string build_completions_body(std::span<const uint32_t> prompt_token_ids,
                                   const GenerationParams& params) {
  json body = common_body(params);
  body["prompt"] = json(std::vector<uint32_t>(prompt_token_ids.begin(), prompt_token_ids.end()));
  return body.dump();
}

std::string build_text_body(ApiKind api, std::string_view prompt_text,
                            const GenerationParams& params) {
  json body = common_body(params);
  if (api == ApiKind::chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt_text}}});
  } else {
    body["prompt"] = prompt_text;
  }
  return body.dump();
}

Expected<StreamChunk> parse_stream_event(const SseEventView& event,
                                         uint64_t completion_tokens_so_far) {
  if (event.data == "[DONE]") {
    StreamChunk done;
    done.kind = StreamChunk::Kind::done;
    return done;
  }
  if (event.type != "error") {
    ScannedChunk fast;
    if (scan_chunk(event.data, fast)) {
      StreamChunk chunk;
      chunk.text = std::move(fast.text);
      chunk.finish_reason = std::move(fast.finish_reason);
      if (fast.has_usage) chunk.usage = Usage{fast.prompt_tokens, fast.completion_tokens};
      chunk.n_tokens = tokens_in_chunk(chunk, fast.has_text_field, completion_tokens_so_far);
      return chunk;
    }
  }
  json doc = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    if (event.type == "error") return error_chunk(json(event.data));
    return fail(ErrorKind::input, fmt::format("the server sent an event that is not JSON: '{}'",
                                              one_line(event.data)));
  }
  if (!doc.is_object()) {
    return fail(ErrorKind::input, "the server sent an event that is not a JSON object");
  }
  if (auto it = doc.find("error"); it != doc.end() && !it->is_null()) return error_chunk(*it);
  if (event.type == "error") return error_chunk(doc);

  StreamChunk chunk;
  bool has_text_field = false;
  if (auto choices = doc.find("choices");
      choices != doc.end() && choices->is_array() && !choices->empty()) {
    const json& choice = (*choices)[0];
    if (!choice.is_object()) return fail(ErrorKind::input, "a streamed choice is not an object");
    if (auto t = choice.find("text"); t != choice.end() && t->is_string()) {
      chunk.text = t->get<std::string>();
      has_text_field = true;
    }
    if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
      for (const char* key : {"content", "reasoning_content", "reasoning"}) {
        if (auto c = d->find(key); c != d->end() && c->is_string()) {
          chunk.text += c->get<std::string>();
          has_text_field = true;
        }
      }
    }
    if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) {
      chunk.finish_reason = f->get<std::string>();
    }
  }
  if (auto u = doc.find("usage"); u != doc.end() && u->is_object()) {
    Usage usage;
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_unsigned()) {
      usage.prompt_tokens = p->get<uint64_t>();
    }
    if (auto c = u->find("completion_tokens"); c != u->end() && c->is_number_unsigned()) {
      usage.completion_tokens = c->get<uint64_t>();
    }
    chunk.usage = usage;
  }
  chunk.n_tokens = tokens_in_chunk(chunk, has_text_field, completion_tokens_so_far);
  return chunk;
}

}  // namespace kvprof::client
