// workload.jsonl: one JSON object per request, written by `kvprof workload` and read back by
// `kvprof requests` / `kvprof profile`.
//
// Fields of each line: request_id, condition_id, input_len, output_len, concurrency,
// prefix_mode ("low"|"high"), prefix_len, prompt_format ("tokens"|"text"), prompt (an array of
// token IDs, or a string), arrival ("closed"|"poisson"), send_offset_s (poisson only),
// ignore_eos, max_tokens.
#pragma once

#include <cstdio>
#include <filesystem>
#include <istream>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::workload {

// The longest line read_workload accepts (a 1M-token prompt of 7-character IDs fits).
inline constexpr size_t k_max_line_bytes = 16u << 20;

// One request as a JSON line, without the trailing newline.
std::string to_json_line(const RequestSpec& request);

// Parses one line; `line_no` only goes into error messages. Returns an input error naming the
// field that is missing, of the wrong type or out of bounds, or a prompt whose length is not
// input_len.
Expected<RequestSpec> parse_json_line(std::string_view line, size_t line_no);

// Writes `requests` to `path` (via a temporary file renamed into place); an io error otherwise.
Expected<void> write_workload(const std::filesystem::path& path,
                              const std::vector<RequestSpec>& requests);

// Reads a workload from `in`; blank lines are skipped. Errors name the line: too long, not
// JSON, a bad field, a duplicate request_id, or more than k_max_requests requests.
Expected<std::vector<RequestSpec>> read_workload(std::istream& in);
// Reads a workload file; an io error when it cannot be opened.
Expected<std::vector<RequestSpec>> read_workload(const std::filesystem::path& path);

}  // namespace kvprof::workload
