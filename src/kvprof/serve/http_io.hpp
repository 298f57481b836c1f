// Private to the HTTP front end (serve/server_http.cpp, server_generate.cpp): the bits of HTTP/1.1
// it writes by hand on an Asio socket — status line and headers, chunked framing, a whole write.
// Asio types stay out of public headers.
#pragma once

#include <utility>  // boost 1.74 asio/awaitable.hpp uses std::exchange without including it

#include <boost/asio.hpp>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvprof::serve::http_io {

// "OK", "Bad Request", ... for the statuses the servers answer; "Error" for others.
const char* reason_phrase(int status);

// The status line and headers (ending with the blank line). `content_length` < 0 means chunked
// (with Cache-Control: no-cache). `server_headers` follow the Server line, e.g.
// "Server: kvprof-sim\r\nX-Kvprof-Simulated: 1\r\n"; `extra_headers` end the list.
std::string response_head(int status, std::string_view server_headers,
                          std::string_view content_type, int64_t content_length, bool keep_alive,
                          std::string_view extra_headers = {});

// One chunk of a chunked body.
std::string http_chunk(std::string_view data);

// Writes all of `data`; false when the connection is gone.
boost::asio::awaitable<bool> write_all(boost::asio::ip::tcp::socket& socket, std::string_view data);

}  // namespace kvprof::serve::http_io
