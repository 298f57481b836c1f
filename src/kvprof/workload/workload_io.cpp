// Writing and reading workload.jsonl (prompts in every line, or generated again from the header
// and checked against each line's hash) with bounded lines and per-field validation.
#include "kvprof/workload/workload_io.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "kvprof/util/atomic_file.hpp"
#include "kvprof/workload/grid_json.hpp"
#include "kvprof/workload/prompt_hash.hpp"

namespace kvprof::workload {

using nlohmann::json;

namespace {

// The line's fields up to and including `"max_tokens":N,` (the prompt, or its hash, follows).
std::string fields_text(const RequestSpec& r) {
  std::string line = fmt::format(
      R"({{"request_id":{},"condition_id":{},"input_len":{},"output_len":{},"concurrency":{},)"
      R"("prefix_mode":"{}","prefix_len":{},"prompt_format":"{}","arrival":"{}",)",
      r.request_id, json(r.condition_id).dump(), r.input_len, r.output_len, r.concurrency,
      prefix_mode_name(r.prefix_mode), r.prefix_len, prompt_format_name(r.prompt_format),
      arrival_name(r.arrival));
  if (r.arrival == Arrival::poisson)
    line += fmt::format(R"("send_offset_s":{:.6f},)", r.send_offset_s);
  line += fmt::format(R"("ignore_eos":{},"max_tokens":{},)", r.ignore_eos, r.max_tokens);
  return line;
}

}  // namespace

std::string to_json_line(const RequestSpec& r) {
  std::string line = fields_text(r);
  line += R"("prompt":)";
  if (r.prompt_format == PromptFormat::tokens) {
    line.reserve(line.size() + r.prompt_token_ids.size() * 6 + 2);
    line.push_back('[');
    for (size_t i = 0; i < r.prompt_token_ids.size(); ++i) {
      if (i > 0) line.push_back(',');
      fmt::format_to(std::back_inserter(line), "{}", r.prompt_token_ids[i]);
    }
    line.push_back(']');
  } else {
    line += json(r.prompt_text).dump();
  }
  line.push_back('}');
  return line;
}

std::string to_hashed_json_line(const RequestSpec& r) {
  return fields_text(r) + fmt::format(R"("prompt_sha256":"{}"}})", prompt_sha256(r));
}

std::string header_json_line(const GridOptions& grid, uint64_t n_requests) {
  const nlohmann::ordered_json header = {{"kvprof_workload", k_workload_format_version},
                                         {"prompts", "generated"},
                                         {"n_requests", n_requests},
                                         {"generator", grid_json(grid)}};
  return header.dump();
}

namespace {

Expected<uint64_t> get_uint(const json& doc, const char* key, uint64_t max_value, size_t line_no,
                            std::optional<uint64_t> fallback = std::nullopt) {
  auto it = doc.find(key);
  if (it == doc.end()) {
    if (fallback) return *fallback;
    return fail(ErrorKind::input, fmt::format("line {}: missing field '{}'", line_no, key));
  }
  if (!it->is_number_unsigned() || it->get<uint64_t>() > max_value) {
    return fail(ErrorKind::input,
                fmt::format("line {}: '{}' must be an integer in 0..{}", line_no, key, max_value));
  }
  return it->get<uint64_t>();
}

Expected<std::string> get_string(const json& doc, const char* key, size_t line_no,
                                 std::optional<std::string> fallback = std::nullopt) {
  auto it = doc.find(key);
  if (it == doc.end()) {
    if (fallback) return *fallback;
    return fail(ErrorKind::input, fmt::format("line {}: missing field '{}'", line_no, key));
  }
  if (!it->is_string()) {
    return fail(ErrorKind::input, fmt::format("line {}: '{}' must be a string", line_no, key));
  }
  return it->get<std::string>();
}

#define KVPROF_TRY_ASSIGN(target, expr)                     \
  do {                                                      \
    auto _r = (expr);                                       \
    if (!_r) return std::unexpected(std::move(_r.error())); \
    target = *std::move(_r);                                \
  } while (0)

// 1 = a line was read, 0 = end of input, -1 = the line is longer than `max_bytes`.
int read_line(std::istream& in, std::string& line, size_t max_bytes) {
  line.clear();
  std::streambuf* sb = in.rdbuf();
  if (sb == nullptr) return 0;
  bool any = false;
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) return any ? 1 : 0;
    any = true;
    if (c == '\n') return 1;
    if (line.size() >= max_bytes) return -1;
    line.push_back(static_cast<char>(c));
  }
}

}  // namespace

namespace {

// Every field of a request line but its prompt.
Expected<RequestSpec> parse_fields(const json& doc, size_t line_no) {
  RequestSpec r;
  uint64_t v = 0;
  std::string s;
  KVPROF_TRY_ASSIGN(r.request_id, get_uint(doc, "request_id", k_max_requests * 1000, line_no));
  KVPROF_TRY_ASSIGN(r.condition_id, get_string(doc, "condition_id", line_no));
  if (r.condition_id.empty() || r.condition_id.size() > 200) {
    return fail(ErrorKind::input,
                fmt::format("line {}: 'condition_id' must be 1 to 200 characters", line_no));
  }
  KVPROF_TRY_ASSIGN(v, get_uint(doc, "input_len", k_max_input_len, line_no));
  r.input_len = static_cast<uint32_t>(v);
  KVPROF_TRY_ASSIGN(v, get_uint(doc, "output_len", k_max_output_len, line_no));
  r.output_len = static_cast<uint32_t>(v);
  KVPROF_TRY_ASSIGN(v, get_uint(doc, "concurrency", k_max_concurrency, line_no));
  r.concurrency = static_cast<uint32_t>(v);
  if (r.input_len == 0 || r.output_len == 0 || r.concurrency == 0) {
    return fail(
        ErrorKind::input,
        fmt::format("line {}: input_len, output_len and concurrency must be at least 1", line_no));
  }
  KVPROF_TRY_ASSIGN(s, get_string(doc, "prefix_mode", line_no, "low"));
  auto mode = parse_prefix_mode(s);
  if (!mode) return std::unexpected(mode.error().with_context(fmt::format("line {}", line_no)));
  r.prefix_mode = *mode;
  KVPROF_TRY_ASSIGN(v, get_uint(doc, "prefix_len", r.input_len, line_no, 0));
  r.prefix_len = static_cast<uint32_t>(v);
  KVPROF_TRY_ASSIGN(s, get_string(doc, "arrival", line_no, "closed"));
  auto arrival = parse_arrival(s);
  if (!arrival) {
    return std::unexpected(arrival.error().with_context(fmt::format("line {}", line_no)));
  }
  r.arrival = *arrival;
  if (auto it = doc.find("send_offset_s"); it != doc.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0.0 ||
        it->get<double>() > 1e7) {
      return fail(ErrorKind::input,
                  fmt::format("line {}: 'send_offset_s' must be a number in 0..1e7", line_no));
    }
    r.send_offset_s = it->get<double>();
  }
  if (auto it = doc.find("ignore_eos"); it != doc.end()) {
    if (!it->is_boolean()) {
      return fail(ErrorKind::input,
                  fmt::format("line {}: 'ignore_eos' must be true or false", line_no));
    }
    r.ignore_eos = it->get<bool>();
  }
  KVPROF_TRY_ASSIGN(v, get_uint(doc, "max_tokens", k_max_output_len, line_no, r.output_len));
  r.max_tokens = static_cast<uint32_t>(v);
  if (r.max_tokens == 0) {
    return fail(ErrorKind::input, fmt::format("line {}: 'max_tokens' must be at least 1", line_no));
  }
  return r;
}

// A compact file's request line: the fields, the prompt format and the prompt's hash.
Expected<RequestSpec> parse_hashed_line(const json& doc, size_t line_no, std::string& sha256) {
  auto r = parse_fields(doc, line_no);
  if (!r) return r;
  std::string s;
  KVPROF_TRY_ASSIGN(s, get_string(doc, "prompt_format", line_no));
  auto format = parse_prompt_format(s);
  if (!format) return std::unexpected(format.error().with_context(fmt::format("line {}", line_no)));
  r->prompt_format = *format;
  KVPROF_TRY_ASSIGN(sha256, get_string(doc, "prompt_sha256", line_no));
  if (sha256.size() != 64 || sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return fail(ErrorKind::input,
                fmt::format("line {}: 'prompt_sha256' must be 64 lower-case hex digits", line_no));
  }
  return r;
}

// The request line's prompt, checked against its input_len.
Expected<void> parse_prompt(const json& doc, size_t line_no, RequestSpec& r) {
  auto prompt = doc.find("prompt");
  if (prompt == doc.end()) {
    return fail(ErrorKind::input, fmt::format("line {}: missing field 'prompt'", line_no));
  }
  if (prompt->is_array()) {
    r.prompt_format = PromptFormat::tokens;
    if (prompt->size() != r.input_len) {
      return fail(ErrorKind::input,
                  fmt::format("line {}: the prompt has {} token IDs but input_len is {}", line_no,
                              prompt->size(), r.input_len));
    }
    r.prompt_token_ids.reserve(prompt->size());
    for (const json& t : *prompt) {
      if (!t.is_number_unsigned() || t.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
        return fail(
            ErrorKind::input,
            fmt::format("line {}: the prompt holds something that is not a token ID", line_no));
      }
      r.prompt_token_ids.push_back(static_cast<uint32_t>(t.get<uint64_t>()));
    }
  } else if (prompt->is_string()) {
    r.prompt_format = PromptFormat::text;
    r.prompt_text = prompt->get<std::string>();
    if (r.prompt_text.empty()) {
      return fail(ErrorKind::input, fmt::format("line {}: the prompt is empty", line_no));
    }
  } else {
    return fail(
        ErrorKind::input,
        fmt::format("line {}: 'prompt' must be an array of token IDs or a string", line_no));
  }
  return {};
}

// A compact file's prompts, generated again from its header; the requests by request_id.
struct Generated {
  std::vector<RequestSpec> requests;
};

Expected<Generated> generate_from_header(const json& header, uint64_t max_prompt_tokens) {
  const auto version = header.find("kvprof_workload");
  if (!version->is_number_unsigned() || version->get<uint64_t>() != k_workload_format_version) {
    return fail(ErrorKind::input,
                fmt::format("line 1: workload format {} is not one this kvprof reads (it reads "
                            "{} and files with the prompts in every line)",
                            version->dump(), k_workload_format_version));
  }
  const auto generator = header.find("generator");
  if (generator == header.end()) {
    return fail(ErrorKind::input, "line 1: missing field 'generator'");
  }
  auto grid = parse_grid_json(*generator);
  if (!grid) return std::unexpected(grid.error().with_context("line 1"));
  if (grid_size(*grid).n_prompt_tokens > max_prompt_tokens) {
    return fail(ErrorKind::input,
                fmt::format("line 1: the generator would make {} prompt tokens (at most {})",
                            grid_size(*grid).n_prompt_tokens, max_prompt_tokens));
  }
  auto requests = generate(*grid);
  if (!requests) return std::unexpected(requests.error().with_context("line 1"));
  return Generated{*std::move(requests)};
}

// Takes the prompt of `r` from the generated request of the same id, after checking that it is
// the same request and that its hash is `sha256`.
Expected<void> take_generated_prompt(Generated& g, RequestSpec& r, const std::string& sha256,
                                     size_t line_no) {
  if (r.request_id >= g.requests.size()) {
    return fail(ErrorKind::input,
                fmt::format("line {}: request_id {} is not one the generator makes", line_no,
                            r.request_id));
  }
  RequestSpec& made = g.requests[r.request_id];
  if (made.condition_id != r.condition_id || made.input_len != r.input_len ||
      made.prefix_len != r.prefix_len || made.prompt_format != r.prompt_format) {
    return fail(ErrorKind::input,
                fmt::format("line {}: request {} is not the generator's ({} here, {} generated)",
                            line_no, r.request_id, r.condition_id, made.condition_id));
  }
  if (prompt_sha256(made) != sha256) {
    return fail(ErrorKind::input,
                fmt::format("line {}: the prompt generated for request {} does not match its "
                            "prompt_sha256",
                            line_no, r.request_id));
  }
  r.prompt_token_ids = std::move(made.prompt_token_ids);
  r.prompt_text = std::move(made.prompt_text);
  return {};
}

}  // namespace

Expected<RequestSpec> parse_json_line(std::string_view line, size_t line_no) {
  json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return fail(ErrorKind::input, fmt::format("line {}: not a JSON object", line_no));
  }
  auto r = parse_fields(doc, line_no);
  if (!r) return r;
  if (auto ok = parse_prompt(doc, line_no, *r); !ok) return std::unexpected(ok.error());
  return r;
}

namespace {

// Writes `first_line` (when not empty) and one line per request to `path` through a temporary
// file renamed into place.
template <class LineOf>
Expected<void> write_lines(const std::filesystem::path& path, const std::string& first_line,
                           const std::vector<RequestSpec>& requests, LineOf line_of) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return fail(ErrorKind::io,
                  fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
    }
    if (!first_line.empty()) out << first_line << '\n';
    for (const auto& r : requests) {
      const std::string line = line_of(r);
      out.write(line.data(), static_cast<std::streamsize>(line.size()));
      out.put('\n');
    }
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return fail(ErrorKind::io, fmt::format("cannot write '{}'", path.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", path.string(), ec.message()));
  }
  return {};
}

}  // namespace

Expected<void> write_workload(const std::filesystem::path& path,
                              const std::vector<RequestSpec>& requests) {
  return write_lines(path, "", requests, [](const RequestSpec& r) { return to_json_line(r); });
}

std::filesystem::path generator_path(const std::filesystem::path& workload_path) {
  std::filesystem::path p = workload_path;
  return p.replace_extension(".generator.json");
}

Expected<void> write_generated_workload(const std::filesystem::path& path, const GridOptions& grid,
                                        const std::vector<RequestSpec>& requests) {
  // The generator first: a workload file is never there without what makes its prompts.
  if (auto ok = write_file_atomically(generator_path(path),
                                      header_json_line(grid, requests.size()) + "\n");
      !ok) {
    return ok;
  }
  return write_lines(path, "", requests,
                     [](const RequestSpec& r) { return to_hashed_json_line(r); });
}

namespace {

// read_workload with the generator of a compact file's prompts when it is beside the file (null:
// none, or in the file's first line).
Expected<std::vector<RequestSpec>> read_requests(std::istream& in, uint64_t max_prompt_tokens,
                                                 std::optional<Generated> generated) {
  std::vector<RequestSpec> requests;
  std::unordered_set<uint64_t> ids;
  std::string line;
  size_t line_no = 0;
  for (;;) {
    const int got = read_line(in, line, k_max_line_bytes);
    if (got == 0) break;
    ++line_no;
    if (got < 0) {
      return fail(ErrorKind::input,
                  fmt::format("line {}: longer than {} bytes", line_no, k_max_line_bytes));
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      return fail(ErrorKind::input, fmt::format("line {}: not a JSON object", line_no));
    }
    if (line_no == 1 && doc.contains("kvprof_workload")) {
      auto g = generate_from_header(doc, max_prompt_tokens);
      if (!g) return std::unexpected(g.error());
      generated = std::move(*g);
      continue;
    }
    if (!generated && doc.contains("prompt_sha256") && !doc.contains("prompt") &&
        !doc.contains("prompt_token_ids")) {
      return fail(ErrorKind::input,
                  fmt::format("line {}: a compact workload's line (prompt_sha256) without its "
                              "generator (the .generator.json file written beside it)",
                              line_no));
    }
    std::string sha256;
    auto r = generated ? parse_hashed_line(doc, line_no, sha256) : parse_fields(doc, line_no);
    if (!r) return std::unexpected(r.error());
    if (generated && !ids.contains(r->request_id)) {
      if (auto ok = take_generated_prompt(*generated, *r, sha256, line_no); !ok) {
        return std::unexpected(ok.error());
      }
    } else if (!generated) {
      if (auto ok = parse_prompt(doc, line_no, *r); !ok) return std::unexpected(ok.error());
    }
    if (!ids.insert(r->request_id).second) {
      return fail(ErrorKind::input,
                  fmt::format("line {}: request_id {} appears twice", line_no, r->request_id));
    }
    if (requests.size() >= k_max_requests) {
      return fail(ErrorKind::input, fmt::format("more than {} requests", k_max_requests));
    }
    requests.push_back(*std::move(r));
  }
  if (requests.empty()) return fail(ErrorKind::input, "the workload has no requests");
  return requests;
}

}  // namespace

Expected<std::vector<RequestSpec>> read_workload(std::istream& in, uint64_t max_prompt_tokens) {
  return read_requests(in, max_prompt_tokens, std::nullopt);
}

Expected<std::vector<RequestSpec>> read_workload(const std::filesystem::path& path,
                                                 uint64_t max_prompt_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(ErrorKind::io,
                fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  }
  // A compact file's generator beside it (a file of the first layout has it in its first line).
  std::optional<Generated> generated;
  const auto gen_path = generator_path(path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(gen_path, ec)) {
    std::ifstream gin(gen_path, std::ios::binary);
    std::string text;
    if (read_line(gin, text, k_max_line_bytes) <= 0) {
      return fail(ErrorKind::input, fmt::format("{}: not a workload generator", gen_path.string()));
    }
    const json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!header.is_object() || !header.contains("kvprof_workload")) {
      return fail(ErrorKind::input, fmt::format("{}: not a workload generator", gen_path.string()));
    }
    auto g = generate_from_header(header, max_prompt_tokens);
    if (!g) return std::unexpected(g.error().with_context(gen_path.string()));
    generated = std::move(*g);
  }
  auto r = read_requests(in, max_prompt_tokens, std::move(generated));
  if (!r) return std::unexpected(r.error().with_context(path.string()));
  return r;
}

}  // namespace kvprof::workload
