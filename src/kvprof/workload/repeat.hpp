// Repeated requests: when a condition must last at least --min-condition-s, its requests are
// sent again. A repeat is the same request with its own part of the prompt (after the shared
// prefix) rotated, so a server's prefix cache treats it as new work while a "high" condition's
// shared prefix stays shared.
#pragma once

#include <cstdint>

#include "kvprof/workload/workload.hpp"

namespace kvprof::workload {

// `request` for repeat pass `pass` (0 = the request itself): the tokens (or words) after its
// prefix_len rotated left by `pass` places. A prompt whose own part is shorter than 2 is
// returned unchanged.
RequestSpec repeat_of(const RequestSpec& request, uint32_t pass);

}  // namespace kvprof::workload
