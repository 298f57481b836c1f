// The probe completion and the grid-versus-context check (see endpoint_check.hpp).
#include "kvprof/profile/endpoint_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "kvprof/client/http_get.hpp"
#include "kvprof/client/openai.hpp"
#include "kvprof/profile/server_answers.hpp"
#include "kvprof/profile/server_probe.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::profile {

namespace {

using nlohmann::json;

client::HttpGetOptions request_options(const client::RunOptions& run, uint32_t timeout_ms) {
  client::HttpGetOptions o;
  o.timeout_ms = timeout_ms;
  o.connect_timeout_ms = std::min<uint32_t>(
      timeout_ms, static_cast<uint32_t>(std::min(run.connect_timeout_s, 5.0) * 1000.0));
  o.max_body_bytes = 1U << 20;
  if (!run.api_key.empty()) o.headers.push_back("Authorization: Bearer " + run.api_key);
  return o;
}

// The body of the one-token probe: token IDs, or a short text (completions prompt / chat message).
std::string probe_body(const client::RunOptions& run, const workload::GridOptions& grid,
                       bool tokens) {
  json body = {{"max_tokens", 1}, {"stream", false}, {"temperature", 0}};
  if (!run.model.empty()) body["model"] = run.model;
  if (run.api == client::ApiKind::chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", "Hello"}}});
  } else if (tokens) {
    json ids = json::array();
    for (uint32_t i = 0; i < 4; ++i)
      ids.push_back(std::min(grid.token_id_min + i, grid.token_id_max - 1));
    body["prompt"] = ids;
  } else {
    body["prompt"] = "Hello";
  }
  return body.dump();
}

std::string reason_hint(long status, const std::string& message, const client::RunOptions& run) {
  if (status == 401 || status == 403) {
    return run.api_key.empty() ? " (pass --api-key or set OPENAI_API_KEY)"
                               : " (the server refused the API key)";
  }
  if (status == 404) {
    return to_lower(message).find("model") != std::string::npos
               ? " (check --model)"
               : " (check the path of --endpoint: kvprof posts to <base>/v1/...)";
  }
  return "";
}

// The max context the server states: /v1/models max_model_len, else llama.cpp's /props n_ctx
// (per slot).
void find_max_context(const client::RunOptions& run, const ServerInfo& server,
                      EndpointCheck& check) {
  if (const auto it = server.max_model_len_tokens.find(run.model);
      it != server.max_model_len_tokens.end()) {
    check.max_context_tokens = it->second;
    check.max_context_source = "max_model_len in /v1/models";
    return;
  }
  // The probe read /props already.
  if (server.props && server.props->slot_context_tokens) {
    check.max_context_tokens = *server.props->slot_context_tokens;
    check.max_context_source = "n_ctx per slot in /props";
  }
}

}  // namespace

Expected<EndpointCheck> check_endpoint(const client::RunOptions& run, const ServerInfo& server,
                                       const workload::GridOptions& grid, uint32_t timeout_ms) {
  EndpointCheck check;
  // A name the server does not list: vLLM and SGLang refuse it, llama-server serves any name it
  // is sent. The probe completion below asks the server, and only its refusal refuses.
  std::string unlisted, served;
  if (!server.models.empty() && !run.model.empty() &&
      std::find(server.models.begin(), server.models.end(), run.model) == server.models.end()) {
    for (const auto& m : server.models)
      served += (served.empty() ? "" : ", ") + m;
    const auto close = closest_matches(run.model, server.models, 1);
    unlisted = fmt::format("--model '{}' is not served at {} (it serves: {}){}", run.model,
                           redact_secrets(server_root(run.endpoint)), served,
                           close.empty() ? "" : "; did you mean '" + close.front() + "'?");
  }

  find_max_context(run, server, check);
  if (check.max_context_tokens) {
    const uint64_t input = *std::max_element(grid.input_lens.begin(), grid.input_lens.end());
    const uint64_t output = *std::max_element(grid.output_lens.begin(), grid.output_lens.end());
    if (input + output > *check.max_context_tokens) {
      return fail(ErrorKind::usage,
                  fmt::format("the grid's longest request needs {} tokens ({} in + {} out) but "
                              "the server's max context is {} ({}); use shorter input or output "
                              "lengths",
                              input + output, input, output, *check.max_context_tokens,
                              check.max_context_source));
    }
  }

  const std::string url = client::endpoint_url(run.endpoint, run.api);
  const auto options = request_options(run, timeout_ms);
  const bool token_prompts = run.api == client::ApiKind::completions &&
                             grid.prompt_format == workload::PromptFormat::tokens;
  const auto send = [&](bool tokens) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = client::http_post(url, probe_body(run, grid, tokens), options);
    check.probe_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  auto answer = send(token_prompts);
  if (!answer) {
    return fail(ErrorKind::network,
                fmt::format("the probe completion got no answer: {}", answer.error().message));
  }
  if (token_prompts && answer->status == 400) {
    // A server that takes only text (llama.cpp's OpenAI endpoint) refuses the token IDs; if it
    // takes text, the grid runs as text.
    const std::string refusal = server_message(answer->body);
    auto text = send(false);
    if (text && text->status / 100 == 2) {
      check.use_text_prompts = true;
      check.token_prompt_refusal = refusal;
      answer = std::move(text);
    }
  }
  if (answer->status / 100 != 2 && !unlisted.empty()) {
    const std::string message = server_message(answer->body);
    return fail(ErrorKind::usage, fmt::format("{} (it answered {}{})", unlisted, answer->status,
                                              message.empty() ? "" : ": " + message));
  }
  if (!unlisted.empty()) {
    check.unlisted_model_note = fmt::format(
        "the server lists only {} but answers for --model '{}' (as llama-server does for any "
        "name); the run sends '{}'",
        served, run.model, run.model);
  }
  if (answer->status / 100 != 2) {
    const std::string message = server_message(answer->body);
    return fail(ErrorKind::network,
                fmt::format("the probe completion to {} answered {}: {}{}", url, answer->status,
                            message.empty() ? "(no message)" : message,
                            reason_hint(answer->status, message, run)));
  }

  return check;
}

std::string check_text_token_counts(const client::RunOptions& run,
                                    const std::vector<workload::RequestSpec>& requests,
                                    uint32_t timeout_ms) {
  const std::string url = server_root(run.endpoint) + "/tokenize";
  const auto options = request_options(run, timeout_ms);
  std::set<uint32_t> seen;
  std::vector<std::string> counts;
  double worst_error = 0;
  for (const auto& r : requests) {
    if (r.prompt_text.empty() || !seen.insert(r.input_len).second) continue;
    if (seen.size() > 3) break;
    json body = {{"prompt", r.prompt_text}, {"content", r.prompt_text}};
    if (!run.model.empty()) body["model"] = run.model;
    auto answer = client::http_post(url, body.dump(), options);
    if (!answer || answer->status != 200) break;
    const auto n = read_tokenize_count(answer->body);
    if (!n) break;
    counts.push_back(fmt::format("{} -> {}", r.input_len, *n));
    worst_error = std::max(worst_error, std::abs(static_cast<double>(*n) - r.input_len) /
                                            std::max<double>(1, r.input_len));
  }
  if (counts.empty()) {
    return "their token counts are the prompt_tokens each response reports (request_trace.csv)";
  }
  std::string line = "token counts by /tokenize: " + fmt::format("{}", fmt::join(counts, ", "));
  if (worst_error > 0.1) {
    line += fmt::format(" (up to {:.0f}% off the asked lengths: input lengths are approximate)",
                        worst_error * 100);
  }
  return line;
}

}  // namespace kvprof::profile
