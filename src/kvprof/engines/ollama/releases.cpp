// Ollama's releases and the llama.cpp each bundles: the llm/llama.cpp submodule (v0.1.x -
// v0.3.x), llama/vendoring's LLAMACPP_BASE_COMMIT (v0.4.0 - v0.5.12), Makefile.sync's FETCH_HEAD
// (v0.5.13 - v0.24), LLAMA_CPP_VERSION (v0.30 on), each commit's build number its count of
// commits in llama.cpp (docs/engine-versions.md, "Ollama").
#include <fmt/format.h>

#include <algorithm>

#include "kvprof/engines/ollama/ollama.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

namespace {

struct OllamaRow {
  std::array<uint32_t, 3> first;  // the first release of the row
  uint32_t build;
};

// From each release on, until the next row.
constexpr OllamaRow k_ollama_rows[] = {
    {{0, 1, 45}, 3171},   {{0, 2, 0}, 3337},    {{0, 2, 8}, 3440},   {{0, 3, 1}, 3485},
    {{0, 3, 4}, 3535},    {{0, 3, 10}, 3661},   {{0, 3, 14}, 3862},  {{0, 5, 2}, 4260},
    {{0, 5, 3}, 4327},    {{0, 5, 5}, 4419},    {{0, 5, 13}, 4779},  {{0, 6, 6}, 5125},
    {{0, 6, 7}, 5162},    {{0, 6, 8}, 5237},    {{0, 7, 0}, 5359},   {{0, 11, 5}, 6121},
    {{0, 12, 4}, 6646},   {{0, 12, 6}, 6752},   {{0, 12, 11}, 6840}, {{0, 13, 2}, 7209},
    {{0, 13, 3}, 7345},   {{0, 13, 5}, 7437},   {{0, 30, 0}, 9452},  {{0, 30, 1}, 9479},
    {{0, 30, 4}, 9493},   {{0, 30, 5}, 9509},   {{0, 30, 9}, 9626},  {{0, 30, 10}, 9672},
    {{0, 30, 11}, 9781},  {{0, 31, 0}, 9840},   {{0, 31, 2}, 9888},  {{0, 32, 2}, 10069},
    {{0, 32, 3}, 10091},  {{0, 32, 6}, 10242},  {{0, 32, 8}, 10353}, {{0, 32, 10}, 10380},
    {{0, 32, 14}, 10434}, {{0, 32, 15}, 10488},
};

// Past the newest release kvprof has read (v0.33.0-rc2 runs b10488 as v0.32.15 does).
constexpr std::array<uint32_t, 3> k_newest_ollama{0, 34, 0};

std::string version_name(const std::array<uint32_t, 3>& v) {
  return fmt::format("v{}.{}.{}", v[0], v[1], v[2]);
}

}  // namespace

std::string OllamaRelease::name() const {
  return version_name(version);
}

bool OllamaRelease::at_least(uint32_t major, uint32_t minor, uint32_t patch) const {
  return version >= std::array<uint32_t, 3>{major, minor, patch};
}

Expected<OllamaRelease> parse_ollama_release(std::string_view text) {
  std::string_view t = trim_view(text);
  OllamaRelease out;
  if (t.empty() || t == "latest") {
    out.version = std::end(k_ollama_rows)[-1].first;
    out.llamacpp_build = std::end(k_ollama_rows)[-1].build;
    return out;
  }
  if (t.starts_with('v') || t.starts_with('V')) t.remove_prefix(1);
  const auto rest = read_version_numbers(t, out.version);
  const bool suffix_ok = rest && (rest->empty() || rest->starts_with('-'));  // -rc1
  if (!suffix_ok || out.version == std::array<uint32_t, 3>{}) {
    return fail(ErrorKind::usage,
                fmt::format("Ollama release '{}' is not a version (e.g. v0.5.4; modelled: {})",
                            text.substr(0, 64), ollama_supported_releases()));
  }
  if (out.version < k_ollama_rows[0].first || out.version >= k_newest_ollama) {
    return fail(ErrorKind::usage,
                fmt::format("Ollama {}: kvprof models {} (before v0.1.45 Ollama estimated memory "
                            "by another rule)",
                            out.name(), ollama_supported_releases()));
  }
  const auto* row =
      std::upper_bound(std::begin(k_ollama_rows), std::end(k_ollama_rows), out.version,
                       [](const auto& v, const OllamaRow& r) { return v < r.first; });
  out.llamacpp_build = std::prev(row)->build;
  return out;
}

std::string ollama_supported_releases() {
  return fmt::format("{} - {}", version_name(k_ollama_rows[0].first),
                     version_name(std::end(k_ollama_rows)[-1].first));
}

Expected<std::string> parse_ollama_release_name(std::string_view text) {
  auto r = parse_ollama_release(text);
  if (!r) return std::unexpected(r.error());
  return r->name();
}

}  // namespace kvprof::engines
