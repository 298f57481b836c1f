// Server probe (see server_probe.hpp).
#include "kvprof/profile/server_probe.hpp"

#include <fmt/format.h>

#include "kvprof/client/http_get.hpp"
#include "kvprof/profile/server_answers.hpp"
#include "kvprof/util/redact.hpp"

namespace kvprof::profile {

std::string server_root(std::string_view base_url) {
  std::string url(base_url);
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  const auto scheme = url.find("://");
  const size_t host_start = scheme == std::string::npos ? 0 : scheme + 3;
  const auto slash = url.find('/', host_start);
  const auto v1 = url.find("/v1", host_start);
  if (v1 != std::string::npos) return url.substr(0, v1);
  return slash == std::string::npos ? url : url.substr(0, slash);
}

Expected<ServerInfo> probe_server(std::string_view base_url, std::string_view api_key,
                                  uint32_t timeout_ms) {
  // The GET carries the key when there is one.
  ServerInfo info;
  info.base_url = std::string(base_url);
  const std::string root = server_root(base_url);
  client::HttpGetOptions options;
  options.timeout_ms = timeout_ms;
  options.connect_timeout_ms = std::min<uint32_t>(timeout_ms, 2000);
  options.max_body_bytes = 4U << 20;
  if (!api_key.empty()) options.headers.push_back("Authorization: Bearer " + std::string(api_key));
  client::HttpGetFailure failure = client::HttpGetFailure::none;
  auto models = client::http_get(root + "/v1/models", options, &failure);
  if (!models) {
    return fail(ErrorKind::network,
                fmt::format("cannot reach the server at {}: {} (is it running? leave out "
                            "--endpoint to profile the built-in simulator)",
                            redact_secrets(root), redact_secrets(models.error().message)));
  }
  info.models_status = models->status;
  if (models->status == 401 || models->status == 403) {
    const std::string message = server_message(models->body);
    return fail(
        ErrorKind::network,
        fmt::format("{}/v1/models answered {}: {} ({})", root, models->status,
                    message.empty() ? "(no message)" : message,
                    api_key.empty() ? "the server wants an API key: --api-key or OPENAI_API_KEY"
                                    : "the server refused the API key"));
  }
  if (models->status == 200 && !read_model_list(models->body, info)) {
    return fail(ErrorKind::input,
                fmt::format("{}/v1/models did not answer with an OpenAI model list", root));
  }
  info.simulated = info.owned_by == "kvprof-sim";
  options.timeout_ms = std::min<uint32_t>(timeout_ms, 1000);
  if (auto version = client::http_get(root + "/version", options);
      version && version->status == 200) {
    info.version = read_server_version(version->body);
  }
  // llama.cpp answers /props: its build, and (kvprof serve) its own buffers.
  if (auto props = client::http_get(root + "/props", options); props && props->status == 200) {
    if (auto facts = read_props_facts(props->body)) {
      if (info.version.empty()) info.version = facts->build;
      info.props = std::move(*facts);
    }
  }
  return info;
}

}  // namespace kvprof::profile
