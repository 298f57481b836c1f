// What kvprof reads from a server's answers before a profile run: the model list (/v1/models),
// the version (/version), llama.cpp's per-slot context (/props), a token count (/tokenize) and
// the message of an error body. Each reader takes the body as the server sent it, bounds what it
// keeps, and returns valid UTF-8 (the run's JSON files need it); a body of another shape reads as
// absent, never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvprof/enginelog/log_report.hpp"
#include "kvprof/profile/summary.hpp"

namespace kvprof::profile {

// Fills `info`'s models (at most 64 ids; ids over 512 bytes are skipped), max_model_len_tokens,
// vocab_tokens (llama-server's meta.n_vocab, at most 16 Mi) and owned_by (at most 128 bytes) from
// a /v1/models body; false when it is not an OpenAI model list ({"data": [...]}).
bool read_model_list(std::string_view body, ServerInfo& info);

// The "version" of a /version body, at most 128 bytes; "" when there is none.
std::string read_server_version(std::string_view body);

// What a llama.cpp /props body states of its server: the build ("build_info", at most 128 bytes),
// the model file, the slots and each slot's context, and, where it lists them (kvprof serve's
// "kvprof.memory"), llama.cpp's own model, KV and compute buffers per buffer type (at most 64), as
// figures whose source is "/props". Absent when the body is not llama.cpp's /props (neither
// build_info nor default_generation_settings).
std::optional<PropsFacts> read_props_facts(std::string_view body);

// The token count of a /tokenize body: "count" (SGLang, vLLM) or the length of "tokens"
// (llama.cpp, vLLM).
std::optional<uint64_t> read_tokenize_count(std::string_view body);

// The message of a server's error body: {"error": {"message"}}, {"error": "..."}, {"detail"},
// {"message"}, else the body's first line; at most 300 bytes (then "..."), printable valid UTF-8;
// "" for an empty body.
std::string server_message(std::string_view body);

}  // namespace kvprof::profile
