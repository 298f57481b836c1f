// Faults the HTTP front end can inject into completion requests (tests of a client's error
// handling): a kind, when it strikes and for how long, and which requests get one (every
// request at a rate drawn from a seed, or the one naming it in its X-Kvprof-Fault header).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::serve {

// What a fault does to one completion request.
enum class FaultKind {
  none,
  reset,             // close the connection (TCP RST) after `after_tokens` tokens
  status_500,        // answer 500 before generating
  status_503,        // answer 503 before generating
  status_429,        // answer 429 with Retry-After: `seconds` (rounded up)
  stall,             // stop sending for `seconds` after `after_tokens` tokens, then go on
  malformed_sse,     // after `after_tokens` tokens send a broken JSON event and a garbage line
  slow_first_token,  // wait `seconds` before the first token is sent
};

struct FaultSpec {
  FaultKind kind = FaultKind::none;
  uint32_t after_tokens = 2;  // reset, stall, malformed_sse: tokens sent before the fault
  double seconds = 1.0;       // stall length, first-token delay, Retry-After
};

// Parses a fault as written in --fault-kind or the X-Kvprof-Fault header: a kind ("reset",
// "500", "503", "429", "stall", "malformed", "slow_first_token") followed by optional
// ";after=N" and ";seconds=S" (";retry_after=S" for 429); input error otherwise.
Expected<FaultSpec> parse_fault_spec(std::string_view text);

// The canonical name of a fault kind ("reset", "500", ...; "none").
std::string fault_kind_name(FaultKind kind);

// Which requests get a fault: `fault` at `rate` (0..1, drawn from `seed` per request number),
// and, when `honor_header`, the fault a request names in its X-Kvprof-Fault header.
struct FaultOptions {
  FaultSpec fault;
  double rate = 0.0;
  uint64_t seed = 1;
  bool honor_header = false;
};

// The fault for request number `request_number` carrying header value `header` (empty: none);
// input error (HTTP 400) for a header that is not a fault.
Expected<FaultSpec> request_fault(const FaultOptions& options, std::string_view header,
                                  uint64_t request_number);

}  // namespace kvprof::serve
