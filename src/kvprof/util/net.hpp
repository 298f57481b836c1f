// Small network-address helpers shared by the client, the simulator and the profiler.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvprof {

// True for "localhost" (any case), a 127.0.0.0/8 dotted quad ("127.1.2.3"), "::1" and "[::1]";
// false for anything else, including names that merely start like one ("127.0.0.1.nip.io").
bool is_loopback_host(std::string_view host);

// The host of an http:// or https:// URL ("node1", "10.0.0.5", "::1"), without brackets or port;
// nullopt when `url` has no such scheme or an empty host.
std::optional<std::string> url_host(std::string_view url);

// True when `host` is this machine: a loopback name or address, this machine's host name, or a
// name or address that resolves to an address of one of its network interfaces.
bool is_local_host(std::string_view host);

}  // namespace kvprof
