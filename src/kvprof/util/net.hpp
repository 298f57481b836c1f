// Small network-address helpers shared by the client, the simulator and the profiler.
#pragma once

#include <string_view>

namespace kvprof {

// True for "localhost" (any case), a 127.0.0.0/8 dotted quad ("127.1.2.3"), "::1" and "[::1]";
// false for anything else, including names that merely start like one ("127.0.0.1.nip.io").
bool is_loopback_host(std::string_view host);

}  // namespace kvprof
