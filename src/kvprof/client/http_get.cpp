// HttpGetter on libcurl's easy API: one handle per getter (so keep-alive connections are reused),
// the body bounded in the write callback, cancellation through the progress callback.
#include "kvprof/client/http_get.hpp"

#include <curl/curl.h>

#include <mutex>
#include <string_view>

#include <fmt/format.h>

namespace kvprof::client {
namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct TransferState {
  HttpResponse* response = nullptr;
  uint64_t max_body_bytes = 0;
  bool too_large = false;
  const std::atomic<bool>* cancel = nullptr;
};

size_t on_write(char* data, size_t size, size_t nmemb, void* user) {
  auto* state = static_cast<TransferState*>(user);
  const size_t n = size * nmemb;
  if (state->response->body.size() + n > state->max_body_bytes) {
    state->too_large = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  state->response->body.append(data, n);
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* state = static_cast<TransferState*>(user);
  return (state->cancel != nullptr && state->cancel->load(std::memory_order_relaxed)) ? 1 : 0;
}

HttpGetFailure classify(CURLcode code, bool too_large) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return HttpGetFailure::connect;
    case CURLE_OPERATION_TIMEDOUT:
      return HttpGetFailure::timeout;
    case CURLE_FILESIZE_EXCEEDED:
      return HttpGetFailure::too_large;
    case CURLE_ABORTED_BY_CALLBACK:
      return HttpGetFailure::cancelled;
    case CURLE_WRITE_ERROR:
      return too_large ? HttpGetFailure::too_large : HttpGetFailure::other;
    default:
      return HttpGetFailure::other;
  }
}

}  // namespace

struct HttpGetter::Impl {
  CURL* curl = nullptr;
  char error_buffer[CURL_ERROR_SIZE] = {};
};

HttpGetter::HttpGetter() : m_impl(std::make_unique<Impl>()) {
  init_curl_once();
  m_impl->curl = curl_easy_init();
}

HttpGetter::~HttpGetter() {
  if (m_impl->curl != nullptr) curl_easy_cleanup(m_impl->curl);
}

Expected<HttpResponse> HttpGetter::get(const std::string& url, const HttpGetOptions& options,
                                       HttpGetFailure* failure) {
  return perform(url, nullptr, options, failure);
}

Expected<HttpResponse> HttpGetter::post(const std::string& url, const std::string& json_body,
                                        const HttpGetOptions& options, HttpGetFailure* failure) {
  return perform(url, &json_body, options, failure);
}

Expected<HttpResponse> HttpGetter::perform(const std::string& url, const std::string* json_body,
                                           const HttpGetOptions& options, HttpGetFailure* failure) {
  const char* method = json_body != nullptr ? "POST" : "GET";
  if (failure != nullptr) *failure = HttpGetFailure::none;
  CURL* curl = m_impl->curl;
  if (curl == nullptr) {
    if (failure != nullptr) *failure = HttpGetFailure::other;
    return fail(ErrorKind::internal, "libcurl could not create a handle");
  }
  HttpResponse response;
  TransferState state{&response, options.max_body_bytes, false, options.cancel};
  m_impl->error_buffer[0] = '\0';

  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_slist* header_list = nullptr;
  for (const auto& h : options.headers)
    header_list = curl_slist_append(header_list, h.c_str());
  if (json_body != nullptr) {
    header_list = curl_slist_append(header_list, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json_body->data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json_body->size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 3L);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(options.max_body_bytes));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &state);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, m_impl->error_buffer);

  const CURLcode code = curl_easy_perform(curl);
  // The state lives on this stack frame: make sure no later call sees stale pointers.
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, nullptr);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, nullptr);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, nullptr);
  curl_slist_free_all(header_list);

  if (code != CURLE_OK) {
    const HttpGetFailure why = classify(code, state.too_large);
    if (failure != nullptr) *failure = why;
    if (code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL) {
      return fail(ErrorKind::input,
                  fmt::format("{} {}: {}", method, url, curl_easy_strerror(code)));
    }
    if (why == HttpGetFailure::too_large) {
      return fail(ErrorKind::network, fmt::format("{} {}: response larger than {} bytes", method,
                                                  url, options.max_body_bytes));
    }
    if (why == HttpGetFailure::timeout) {
      return fail(ErrorKind::network, fmt::format("{} {}: no complete answer within {} ms", method,
                                                  url, options.timeout_ms));
    }
    const std::string_view detail = m_impl->error_buffer[0] != '\0'
                                        ? std::string_view(m_impl->error_buffer)
                                        : std::string_view(curl_easy_strerror(code));
    return fail(ErrorKind::network, fmt::format("{} {}: {}", method, url, detail));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  for (const auto& name : options.want_headers) {
    curl_header* h = nullptr;
    if (curl_easy_header(curl, name.c_str(), 0, CURLH_HEADER, -1, &h) == CURLHE_OK &&
        h != nullptr && h->value != nullptr) {
      response.headers[name] = std::string(h->value).substr(0, 8192);
    }
  }
  const char* content_type = nullptr;
  if (curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &content_type) == CURLE_OK &&
      content_type != nullptr) {
    response.content_type = content_type;
  }
  return response;
}

Expected<HttpResponse> http_get(const std::string& url, const HttpGetOptions& options,
                                HttpGetFailure* failure) {
  HttpGetter getter;
  return getter.get(url, options, failure);
}

Expected<HttpResponse> http_post(const std::string& url, const std::string& json_body,
                                 const HttpGetOptions& options, HttpGetFailure* failure) {
  HttpGetter getter;
  return getter.post(url, json_body, options, failure);
}

}  // namespace kvprof::client
