// The request runner's command-line options.
#include "kvprof/client/cli_options.hpp"

namespace kvprof::client {

void add_run_options(CLI::App* cmd, RunCliValues& v) {
  cmd->add_option("--endpoint,--url", v.endpoint,
                  "Server base URL (http://host:port, .../v1, or the full endpoint URL)")
      ->envname("KVPROF_URL")
      ->capture_default_str();
  cmd->add_option("--model", v.model, "Model name sent in each request (default: none sent)")
      ->envname("KVPROF_MODEL");
  cmd->add_option("--api", v.api, "completions (token-ID or text prompts) or chat (text only)")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->capture_default_str();
  cmd->add_option("--request-timeout", v.request_timeout_s, "Per-request timeout, seconds")
      ->envname("KVPROF_REQUEST_TIMEOUT")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--connect-timeout", v.connect_timeout_s, "Connect timeout, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--api-key", v.api_key,
                  "Bearer token for the server (default: $OPENAI_API_KEY); never written out")
      ->envname("OPENAI_API_KEY");
  cmd->add_option("--transport", v.transport,
                  "HTTP client: raw (kvprof's own, http:// only), curl (libcurl), or auto (raw "
                  "for http://, curl for https:// and proxies)")
      ->envname("KVPROF_TRANSPORT")
      ->check(CLI::IsMember({"auto", "raw", "curl"}))
      ->capture_default_str();
  cmd->add_option("--read-interval-us", v.read_interval_us,
                  "Raw transport: while streams are busy, read the sockets at most once per this "
                  "many microseconds (0: on every arrival). Token times are the kernel's receive "
                  "times either way; tokens that arrive within one interval share a read and the "
                  "newest one's time")
      ->envname("KVPROF_READ_INTERVAL_US")
      ->check(CLI::Range(0u, 1'000'000u))
      ->capture_default_str();
}

Expected<RunOptions> resolve(const RunCliValues& v) {
  RunOptions o;
  o.endpoint = v.endpoint;
  o.model = v.model;
  auto api = parse_api_kind(v.api);
  if (!api) return fail(ErrorKind::usage, api.error().message);
  o.api = *api;
  o.request_timeout_s = v.request_timeout_s;
  o.connect_timeout_s = v.connect_timeout_s;
  o.api_key = v.api_key;
  o.read_interval_us = v.read_interval_us;
  auto transport = parse_transport_kind(v.transport);
  if (!transport) return fail(ErrorKind::usage, transport.error().message);
  o.transport = *transport;
  if (o.endpoint.empty()) return fail(ErrorKind::usage, "--endpoint is empty");
  if (!o.endpoint.starts_with("http://") && !o.endpoint.starts_with("https://")) {
    return fail(ErrorKind::usage, "--endpoint must start with http:// or https://");
  }
  return o;
}

}  // namespace kvprof::client
