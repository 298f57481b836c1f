// A small blocking HTTP GET (libcurl easy behind a private Impl): a whole-request timeout, a
// bound on the body size and a cancel flag, for polling /metrics and /slots; and a POST of a JSON
// body for the one-off requests of the profile probe (/v1/completions, /tokenize).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::client {

struct HttpResponse {
  long status = 0;           // the HTTP status code, e.g. 200 or 404
  std::string body;          // at most HttpGetOptions::max_body_bytes
  std::string content_type;  // the Content-Type header, empty when none
  // The headers HttpGetOptions::want_headers asked for (names as asked), of the last response
  // after redirects; absent ones are left out.
  std::map<std::string, std::string> headers;
};

struct HttpGetOptions {
  uint32_t timeout_ms = 2000;          // whole request
  uint32_t connect_timeout_ms = 1000;  // the TCP (and TLS) connect alone
  uint64_t max_body_bytes = 32ULL << 20;
  const std::atomic<bool>* cancel = nullptr;  // when it turns true the request ends promptly
  std::vector<std::string> headers;           // extra "Name: value" lines, e.g. Authorization
  std::vector<std::string> want_headers;      // response headers to return, e.g. Content-Range
};

// Why a GET produced no response (statuses such as 404 are responses, not failures).
enum class HttpGetFailure { none, connect, timeout, too_large, cancelled, other };

// A GET client that keeps its connection alive between calls; one thread at a time.
class HttpGetter {
 public:
  HttpGetter();
  ~HttpGetter();
  HttpGetter(const HttpGetter&) = delete;
  HttpGetter& operator=(const HttpGetter&) = delete;

  // GETs `url`. Returns the response whatever its status; a network error when no connection
  // could be made, the timeout passed, the body grew past the bound or `cancel` turned true.
  // `failure`, when given, says which.
  Expected<HttpResponse> get(const std::string& url, const HttpGetOptions& options = {},
                             HttpGetFailure* failure = nullptr);

  // POSTs `json_body` (Content-Type: application/json); the same answers and errors as get().
  Expected<HttpResponse> post(const std::string& url, const std::string& json_body,
                              const HttpGetOptions& options = {},
                              HttpGetFailure* failure = nullptr);

 private:
  Expected<HttpResponse> perform(const std::string& url, const std::string* json_body,
                                 const HttpGetOptions& options, HttpGetFailure* failure);
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// One GET on a fresh connection; see HttpGetter::get.
Expected<HttpResponse> http_get(const std::string& url, const HttpGetOptions& options = {},
                                HttpGetFailure* failure = nullptr);

// One POST on a fresh connection; see HttpGetter::post.
Expected<HttpResponse> http_post(const std::string& url, const std::string& json_body,
                                 const HttpGetOptions& options = {},
                                 HttpGetFailure* failure = nullptr);

}  // namespace kvprof::client
