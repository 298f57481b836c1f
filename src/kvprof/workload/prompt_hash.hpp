// The fingerprint a compact workload.jsonl keeps of each prompt instead of the prompt itself.
#pragma once

#include <string>

#include "kvprof/workload/workload.hpp"

namespace kvprof::workload {

// SHA-256 (lower-case hex) of the request's prompt: of its token IDs as 32-bit little-endian
// integers for token prompts, of the text's bytes for text prompts. Never fails.
std::string prompt_sha256(const RequestSpec& request);

}  // namespace kvprof::workload
