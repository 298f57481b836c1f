// Before a profile run: is the server there, what does it serve, which version is it.
#pragma once

#include <string>
#include <string_view>

#include "kvprof/profile/summary.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::profile {

// The server root of an OpenAI base URL: "http://h:8000/v1" and ".../v1/completions" ->
// "http://h:8000".
std::string server_root(std::string_view base_url);

// GETs /v1/models (with `api_key` when set) and /version within `timeout_ms` in all. A network
// error saying the server cannot be reached (with the reason) when /v1/models gets no answer, or
// naming the status and the server's message when it answers 401/403; an input error when it
// answers 200 but not with a model list.
Expected<ServerInfo> probe_server(std::string_view base_url, std::string_view api_key,
                                  uint32_t timeout_ms = 4000);

}  // namespace kvprof::profile
