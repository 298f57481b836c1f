// Secrets out of what kvprof writes down: a launch command or URL is recorded in summary.json,
// manifest.json and progress lines with its keys, tokens and passwords replaced by "***".
#pragma once

#include <string>
#include <string_view>

namespace kvprof {

// Returns `text` with the value of every flag whose name ends in api-key, token, password or
// secret (--api-key V, --hf-token=V; not --max-num-batched-tokens), every environment
// assignment whose name ends so (HF_TOKEN=V, OPENAI_API_KEY=V), "Bearer V" and a URL's password
// (scheme://user:V@) replaced by "***".
std::string redact_secrets(std::string_view text);

}  // namespace kvprof
