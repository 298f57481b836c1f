// Hugging Face Hub client and cache (see hf_hub.hpp).
#include "kvprof/model/hf_hub.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvprof/client/http_get.hpp"
#include "kvprof/model/hf_config.hpp"
#include "kvprof/model/safetensors.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t k_max_all_headers_bytes = 512 * k_mib;
constexpr size_t k_max_name_chars = 96;

std::string env_or(const char* name, std::string fallback = {}) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool env_true(const char* name) {
  const std::string v = to_lower(env_or(name));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

bool safe_path_part(std::string_view s, size_t max_chars) {
  if (s.empty() || s.size() > max_chars || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

Expected<std::string> read_small_file(const fs::path& file, uint64_t max_bytes) {
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", file.string(), ec.message()));
  if (size > max_bytes) {
    return fail(ErrorKind::input, fmt::format("{}: {} bytes, more than {}", file.string(), size,
                                              format_bytes(max_bytes)));
  }
  std::ifstream in(file, std::ios::binary);
  std::string text(size, '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(size))) {
    return fail(ErrorKind::io, fmt::format("{}: cannot read", file.string()));
  }
  return text;
}

// Writes `bytes` to `file` through a temporary name, creating its folder.
Expected<void> write_file(const fs::path& file, std::string_view bytes) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec)
    return fail(ErrorKind::io, fmt::format("{}: {}", file.parent_path().string(), ec.message()));
  const fs::path tmp = file.string() + ".kvprof-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
      fs::remove(tmp, ec);
      return fail(ErrorKind::io, fmt::format("{}: cannot write", file.string()));
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", file.string(), ec.message()));
  return {};
}

// One shard's header as read: the file's first 8 + N bytes and its size.
struct ShardHeader {
  std::string name;
  std::string prefix;
  uint64_t file_bytes = 0;
};

// The kvprof-headers/<commit>/ folder of a cached repo.
fs::path header_folder(const fs::path& repo_folder, const std::string& commit) {
  return repo_folder / "kvprof-headers" / commit;
}

class Hub {
 public:
  Hub(const HubOptions& options, std::string repo) : m_o(options), m_repo(std::move(repo)) {}

  // GETs `file` of the repo at the revision, with an optional Range; checks the status.
  Expected<client::HttpResponse> get(const std::string& file, uint64_t max_body_bytes,
                                     std::optional<std::pair<uint64_t, uint64_t>> range = {}) {
    std::string root = m_o.endpoint;
    while (root.ends_with('/'))
      root.pop_back();
    const std::string url =
        fmt::format("{}/{}/resolve/{}/{}", root, m_repo, percent_encode(m_o.revision), file);
    client::HttpGetOptions opts;
    opts.timeout_ms = m_o.timeout_ms;
    opts.connect_timeout_ms = std::min<uint32_t>(m_o.timeout_ms, 10'000);
    opts.max_body_bytes = max_body_bytes;
    opts.want_headers = {"Content-Range", "X-Repo-Commit", "X-Error-Code", "X-Error-Message"};
    if (m_o.token) opts.headers.push_back("Authorization: Bearer " + *m_o.token);
    if (range)
      opts.headers.push_back(fmt::format("Range: bytes={}-{}", range->first, range->second));
    auto r = m_getter.get(url, opts);
    if (!r) {
      return fail(r.error().kind,
                  redact_secrets(fmt::format("the Hugging Face Hub ({}) did not answer for {}: {}",
                                             root, m_repo, r.error().message)));
    }
    const auto header = [&](const char* name) {
      const auto it = r->headers.find(name);
      return it == r->headers.end() ? std::string() : it->second;
    };
    const std::string code = header("X-Error-Code");
    if (r->status == 401 || r->status == 403) {
      if (code == "RepoNotFound") return repo_not_found();
      if (m_o.token) {
        return fail(ErrorKind::network,
                    fmt::format("{}: the Hub refused the token (HTTP {}): accept the model's "
                                "license on its page, or use a token with access",
                                m_repo, r->status));
      }
      return fail(ErrorKind::network,
                  fmt::format("{} is gated or private (HTTP {}): accept its license on the Hub "
                              "and set HF_TOKEN or --hf-token",
                              m_repo, r->status));
    }
    if (r->status == 404) {
      if (code == "RepoNotFound" || code == "RevisionNotFound") return repo_not_found();
      return fail(ErrorKind::not_found, fmt::format("{}: no {} on the Hub", m_repo, file));
    }
    if (r->status != 200 && r->status != 206) {
      return fail(ErrorKind::network,
                  fmt::format("{}: the Hub answered HTTP {} for {}", m_repo, r->status, file));
    }
    if (m_commit.empty()) {
      const std::string commit = header("X-Repo-Commit");
      if (safe_path_part(commit, 64)) m_commit = commit;
    }
    return r;
  }

  // The header of one shard: two Range requests (its length, then its JSON).
  Expected<ShardHeader> shard_header(const std::string& shard) {
    auto head = get(shard, 64, std::pair<uint64_t, uint64_t>{0, 7});
    if (!head) return std::unexpected(head.error());
    const auto range = head->headers.find("Content-Range");
    const auto size =
        range == head->headers.end() ? std::nullopt : parse_content_range_size(range->second);
    if (head->status != 206 || !size || head->body.size() != 8) {
      return fail(ErrorKind::input,
                  fmt::format("{}/{}: the Hub did not answer the Range request for its header "
                              "(HTTP {}, {} bytes)",
                              m_repo, shard, head->status, head->body.size()));
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<uint8_t>(head->body[static_cast<size_t>(i)]);
    const uint64_t file_bytes = *size;
    if (file_bytes < 10 || n < 2 || n > k_max_safetensors_header_bytes || n > file_bytes - 8) {
      return fail(ErrorKind::input, fmt::format("{}/{}: header length {} does not fit a file of "
                                                "{} bytes",
                                                m_repo, shard, n, file_bytes));
    }
    auto header_json = get(shard, n, std::pair<uint64_t, uint64_t>{8, 8 + n - 1});
    if (!header_json) return std::unexpected(header_json.error());
    if (header_json->status != 206 || header_json->body.size() != n) {
      return fail(ErrorKind::input, fmt::format("{}/{}: the header's Range answer has {} of {} "
                                                "bytes",
                                                m_repo, shard, header_json->body.size(), n));
    }
    return ShardHeader{shard, head->body + header_json->body, file_bytes};
  }

  [[nodiscard]] const std::string& commit() const { return m_commit; }
  // Where the files came from; a password in HF_ENDPOINT's URL is not repeated.
  [[nodiscard]] std::string source() const {
    return redact_secrets(
        fmt::format("{}/{}{}", m_o.endpoint, m_repo, m_commit.empty() ? "" : " @ " + m_commit));
  }

 private:
  std::unexpected<Error> repo_not_found() const {
    return fail(ErrorKind::not_found,
                fmt::format("{}: no such model on the Hugging Face Hub ({}){}", m_repo,
                            m_o.endpoint, m_o.token ? "" : " (if it is private, set HF_TOKEN)"));
  }

  const HubOptions& m_o;
  std::string m_repo;
  client::HttpGetter m_getter;
  std::string m_commit;
};

// Parses every shard header, in index order, into one tensor list.
Expected<std::vector<TensorInfo>> tensors_of(const ShardMap& index,
                                             const std::vector<ShardHeader>& headers,
                                             std::string_view where) {
  std::vector<std::pair<std::string, std::vector<TensorInfo>>> read;
  for (const auto& h : headers) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(h.prefix.data());
    auto tensors = parse_safetensors_header({bytes, h.prefix.size()}, h.file_bytes);
    if (!tensors)
      return std::unexpected(tensors.error().with_context(fmt::format("{}/{}", where, h.name)));
    read.emplace_back(h.name, std::move(*tensors));
  }
  return join_shards(index, std::move(read), where);
}

// The snapshot of `options.revision` in the cache, when it holds config.json.
std::optional<std::pair<std::string, fs::path>> cached_snapshot(const HubOptions& options,
                                                                const fs::path& repo_folder) {
  std::string commit;
  std::error_code ec;
  if (safe_path_part(options.revision, 255)) {
    const fs::path ref = repo_folder / "refs" / options.revision;
    if (auto text = read_small_file(ref, 1024); text) commit = trim(*text);
    if (commit.empty() && fs::is_directory(repo_folder / "snapshots" / options.revision, ec)) {
      commit = options.revision;  // the revision is a commit
    }
  }
  if (!safe_path_part(commit, 64)) return std::nullopt;
  const fs::path snapshot = repo_folder / "snapshots" / commit;
  if (!fs::is_regular_file(snapshot / "config.json", ec)) return std::nullopt;
  return std::pair{commit, snapshot};
}

// The tensors a cached snapshot gives: the full safetensors files when they are all there, else
// the headers kvprof saved; nothing when neither.
Expected<std::optional<std::vector<TensorInfo>>> cached_tensors(const fs::path& repo_folder,
                                                                const std::string& commit,
                                                                const fs::path& snapshot) {
  std::error_code ec;
  const fs::path index_file = snapshot / "model.safetensors.index.json";
  ShardMap index;
  if (fs::is_regular_file(index_file, ec)) {
    auto text = read_small_file(index_file, k_max_safetensors_index_bytes);
    if (!text) return std::unexpected(text.error());
    auto parsed = parse_safetensors_index(*text, index_file.string());
    if (!parsed) return std::unexpected(parsed.error());
    index = std::move(*parsed);
  } else {
    index["model.safetensors"];
  }
  const bool all_files = std::all_of(index.begin(), index.end(), [&](const auto& shard) {
    return fs::is_regular_file(snapshot / shard.first, ec);
  });
  if (all_files) {
    auto tensors = read_safetensors_folder(snapshot);
    if (!tensors) return std::unexpected(tensors.error());
    return std::optional(std::move(*tensors));
  }
  const fs::path headers_dir = header_folder(repo_folder, commit);
  auto sizes_text = read_small_file(headers_dir / "sizes.json", k_mib);
  if (!sizes_text) return std::optional<std::vector<TensorInfo>>();
  const auto sizes = nlohmann::json::parse(*sizes_text, nullptr, false);
  if (!sizes.is_object()) return std::optional<std::vector<TensorInfo>>();
  std::vector<ShardHeader> headers;
  for (const auto& [shard, names] : index) {
    const auto it = sizes.find(shard);
    if (it == sizes.end() || !it->is_number_unsigned()) {
      return std::optional<std::vector<TensorInfo>>();
    }
    auto prefix =
        read_small_file(headers_dir / (shard + ".header"), k_max_safetensors_header_bytes + 8);
    if (!prefix) return std::optional<std::vector<TensorInfo>>();
    headers.push_back({shard, std::move(*prefix), it->get<uint64_t>()});
  }
  auto tensors = tensors_of(index, headers, headers_dir.string());
  if (!tensors) return std::unexpected(tensors.error());
  return std::optional(std::move(*tensors));
}

// Saves what was fetched; a failure only adds a note.
void save_to_cache(const HubOptions& options, const fs::path& repo_folder, const HubFiles& files,
                   const std::optional<std::string>& index_text,
                   const std::vector<ShardHeader>& headers, std::vector<std::string>& notes) {
  if (files.commit.empty()) return;
  const fs::path snapshot = repo_folder / "snapshots" / files.commit;
  Expected<void> ok = write_file(snapshot / "config.json", files.config_text);
  if (ok && index_text) ok = write_file(snapshot / "model.safetensors.index.json", *index_text);
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& h : headers) {
    if (!ok) break;
    ok = write_file(header_folder(repo_folder, files.commit) / (h.name + ".header"), h.prefix);
    sizes[h.name] = h.file_bytes;
  }
  if (ok && !headers.empty()) {
    ok = write_file(header_folder(repo_folder, files.commit) / "sizes.json", sizes.dump());
  }
  if (ok && safe_path_part(options.revision, 255)) {
    ok = write_file(repo_folder / "refs" / options.revision, files.commit);
  }
  if (!ok) notes.push_back("not cached: " + ok.error().message);
}

}  // namespace

HubOptions hub_options_from_env() {
  HubOptions o;
  o.endpoint = env_or("HF_ENDPOINT", o.endpoint);
  std::string token = env_or("HF_TOKEN", env_or("HUGGING_FACE_HUB_TOKEN"));
  if (!token.empty()) o.token = token;
  o.offline = env_true("HF_HUB_OFFLINE");
  if (const std::string hub = env_or("HF_HUB_CACHE"); !hub.empty()) {
    o.cache_dir = hub;
  } else if (const std::string home = env_or("HF_HOME"); !home.empty()) {
    o.cache_dir = fs::path(home) / "hub";
  } else if (const std::string xdg = env_or("XDG_CACHE_HOME"); !xdg.empty()) {
    o.cache_dir = fs::path(xdg) / "huggingface" / "hub";
  } else {
    o.cache_dir = fs::path(env_or("HOME", "/root")) / ".cache" / "huggingface" / "hub";
  }
  return o;
}

bool is_hub_repo_id(std::string_view ref) {
  const auto slash = ref.find('/');
  if (slash == std::string_view::npos || ref.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  for (const std::string_view part : {ref.substr(0, slash), ref.substr(slash + 1)}) {
    if (!safe_path_part(part, k_max_name_chars) || part.find("..") != std::string_view::npos ||
        part.front() == '.' || part.front() == '-' || part.back() == '.' || part.back() == '-') {
      return false;
    }
  }
  return true;
}

fs::path hub_cache_folder(const HubOptions& options, std::string_view repo_id) {
  std::string name = "models--" + std::string(repo_id);
  const auto slash = name.find('/');
  if (slash != std::string::npos) name.replace(slash, 1, "--");
  return options.cache_dir / name;
}

std::optional<uint64_t> parse_content_range_size(std::string_view text) {
  const std::string t = trim(text);
  if (!t.starts_with("bytes ")) return std::nullopt;
  const auto slash = t.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view total = std::string_view(t).substr(slash + 1);
  if (total.empty() || total.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (const char c : total) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

Expected<HubFiles> fetch_hub_files(std::string_view repo_id, const HubOptions& options) {
  if (!is_hub_repo_id(repo_id)) {
    return fail(ErrorKind::usage,
                fmt::format("'{}' is not a Hugging Face model id (ORG/NAME)", repo_id));
  }
  const std::string repo(repo_id);
  const fs::path folder = hub_cache_folder(options, repo);
  if (auto snap = cached_snapshot(options, folder)) {
    auto config = read_small_file(snap->second / "config.json", k_max_config_json_bytes);
    if (!config) return std::unexpected(config.error());
    auto tensors = cached_tensors(folder, snap->first, snap->second);
    if (!tensors) return std::unexpected(tensors.error());
    if (*tensors || options.offline) {
      HubFiles files{repo, snap->first, std::move(*config), {}, snap->second.string(), {}, true};
      if (*tensors) {
        files.tensors = std::move(**tensors);
      } else {
        files.notes.push_back(
            "the cache holds config.json but no safetensors headers; sizes "
            "from config.json");
      }
      return files;
    }
  }
  if (options.offline) {
    return fail(ErrorKind::not_found,
                fmt::format("{}: not in the local Hugging Face cache ({}) and offline "
                            "(HF_HUB_OFFLINE or --offline)",
                            repo, options.cache_dir.string()));
  }
  Hub hub(options, repo);
  auto config = hub.get("config.json", k_max_config_json_bytes);
  if (!config) return std::unexpected(config.error());
  HubFiles files{repo, {}, std::move(config->body), {}, {}, {}, false};
  std::optional<std::string> index_text;
  ShardMap index;
  auto index_answer = hub.get("model.safetensors.index.json", k_max_safetensors_index_bytes);
  if (index_answer) {
    auto parsed =
        parse_safetensors_index(index_answer->body, repo + "/model.safetensors.index.json");
    if (!parsed) return std::unexpected(parsed.error());
    index = std::move(*parsed);
    index_text = std::move(index_answer->body);
  } else if (index_answer.error().kind == ErrorKind::not_found) {
    index["model.safetensors"];
  } else {
    return std::unexpected(index_answer.error());
  }
  std::vector<ShardHeader> headers;
  uint64_t header_bytes = 0;
  for (const auto& [shard, names] : index) {
    auto h = hub.shard_header(shard);
    if (!h && h.error().kind == ErrorKind::not_found && !index_text) {
      files.notes.push_back(
          "no safetensors on the Hub (only other formats): sizes from "
          "config.json");
      headers.clear();
      break;
    }
    if (!h) return std::unexpected(h.error());
    header_bytes += h->prefix.size();
    if (header_bytes > k_max_all_headers_bytes) {
      return fail(ErrorKind::input, fmt::format("{}: safetensors headers of more than {} in all",
                                                repo, format_bytes(k_max_all_headers_bytes)));
    }
    headers.push_back(std::move(*h));
  }
  if (!headers.empty()) {
    auto tensors = tensors_of(index, headers, repo);
    if (!tensors) return std::unexpected(tensors.error());
    files.tensors = std::move(*tensors);
  }
  files.commit = hub.commit();
  files.source = hub.source();
  save_to_cache(options, folder, files, index_text, headers, files.notes);
  return files;
}

}  // namespace kvprof::model
