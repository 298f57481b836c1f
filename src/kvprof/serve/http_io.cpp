// HTTP/1.1 response framing shared by the serve and serve-sim front ends.

// GCC 12 at -O2 reports a false "mismatched new/delete" when it inlines Asio 1.74's coroutine
// frame allocator (see server_http.cpp).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "kvprof/serve/http_io.hpp"  // first: it includes <utility> before Asio

#include <fmt/format.h>

#include <boost/asio/redirect_error.hpp>

namespace kvprof::serve::http_io {

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string response_head(int status, std::string_view server_headers,
                          std::string_view content_type, int64_t content_length, bool keep_alive,
                          std::string_view extra_headers) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n{}Content-Type: {}\r\n", status,
                                 reason_phrase(status), server_headers, content_type);
  if (content_length >= 0) {
    head += fmt::format("Content-Length: {}\r\n", content_length);
  } else {
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n";
  }
  if (!keep_alive) head += "Connection: close\r\n";
  head += extra_headers;
  head += "\r\n";
  return head;
}

std::string http_chunk(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

boost::asio::awaitable<bool> write_all(boost::asio::ip::tcp::socket& socket,
                                       std::string_view data) {
  boost::system::error_code ec;
  co_await boost::asio::async_write(socket, boost::asio::buffer(data.data(), data.size()),
                                    boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  co_return !ec;
}

}  // namespace kvprof::serve::http_io
