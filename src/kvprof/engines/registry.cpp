// The engine rows and the front doors (see registry.hpp).
#include "kvprof/engines/registry.hpp"

#include <fmt/format.h>

#include <array>

#include "kvprof/engines/hf/hf.hpp"
#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/llamacpp/releases.hpp"
#include "kvprof/engines/ollama/ollama.hpp"
#include "kvprof/engines/sglang/releases.hpp"
#include "kvprof/engines/sglang/sglang.hpp"
#include "kvprof/engines/tgi/releases.hpp"
#include "kvprof/engines/tgi/tgi.hpp"
#include "kvprof/engines/trtllm/trtllm.hpp"
#include "kvprof/engines/vllm/releases.hpp"
#include "kvprof/engines/vllm/vllm.hpp"
#include "kvprof/util/shell.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {
namespace {

Expected<std::string> parse_vllm_release(std::string_view text) {
  auto rules = parse_vllm_version(text);
  if (!rules) return std::unexpected(rules.error());
  return std::string((*rules)->name);
}

Expected<std::string> parse_sglang_release(std::string_view text) {
  auto rules = parse_sglang_version(text);
  if (!rules) return std::unexpected(rules.error());
  return std::string((*rules)->name);
}

Expected<std::string> parse_tgi_release_name(std::string_view text) {
  auto rules = parse_tgi_release(text);
  if (!rules) return std::unexpected(rules.error());
  return std::string((*rules)->name);
}

Expected<std::string> parse_llamacpp_release_name(std::string_view text) {
  auto release = parse_llamacpp_release(text);
  if (!release) return std::unexpected(release.error());
  return release->name;
}

// In the order of the enum.
constexpr std::array<EngineFunctions, 8> k_engine_functions{{
    {Engine::unknown, nullptr, nullptr, nullptr, nullptr, nullptr},
    {Engine::vllm, &estimate_vllm, &parse_vllm_release, &vllm_log_reader, &read_vllm_metrics,
     &read_vllm_command},
    {Engine::sglang, &estimate_sglang, &parse_sglang_release, &sglang_log_reader,
     &read_sglang_metrics, &read_sglang_command},
    {Engine::trtllm, &estimate_trtllm, &parse_trtllm_version, &trtllm_log_reader, nullptr, nullptr},
    {Engine::llamacpp, &estimate_llamacpp, &parse_llamacpp_release_name, &llamacpp_log_reader,
     &read_llamacpp_metrics, &read_llamacpp_command},
    {Engine::hf, &estimate_hf, nullptr, nullptr, nullptr, nullptr},
    {Engine::tgi, &estimate_tgi, &parse_tgi_release_name, &tgi_log_reader, &read_tgi_metrics,
     &read_tgi_command},
    {Engine::ollama, &estimate_ollama, &parse_ollama_release_name, &ollama_log_reader, nullptr,
     nullptr},
}};

// The order the log readers try a line of an engine not yet known: Ollama's first (its log
// holds llama.cpp's lines, which its reader takes only after an Ollama line), llama.cpp's (its
// lines are the most distinctive), then vLLM, SGLang, TensorRT-LLM and TGI.
constexpr std::array<Engine, 6> k_log_reading_order{Engine::ollama, Engine::llamacpp, Engine::vllm,
                                                    Engine::sglang, Engine::trtllm,   Engine::tgi};

// "a, b or c".
std::string names_list(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  return out;
}

}  // namespace

const EngineFunctions& engine_functions(Engine engine) {
  const auto i = static_cast<size_t>(engine);
  return i < k_engine_functions.size() ? k_engine_functions[i] : k_engine_functions[0];
}

Expected<Engine> parse_planned_engine(std::string_view text) {
  const auto engine = find_engine(text);
  if (engine && engine_functions(*engine).plan != nullptr) return *engine;
  std::vector<std::string_view> planned;
  for (const auto& row : k_engine_functions) {
    if (row.plan != nullptr) planned.push_back(engine_name(row.id));
  }
  return fail(ErrorKind::usage,
              fmt::format("unknown engine '{}' (use {})", text, names_list(planned)));
}

Expected<estimate::Estimate> plan(const estimate::EstimateInput& in) {
  if (in.model.n_layer == 0 || in.model.hidden_size == 0) {
    return fail(ErrorKind::input, "the model has no layers or hidden size");
  }
  if (in.gpu.memory_bytes == 0) return fail(ErrorKind::usage, "the GPU has no memory");
  const auto planner = engine_functions(in.settings.engine).plan;
  if (planner == nullptr) {
    return fail(ErrorKind::usage, fmt::format("kvprof does not plan {}",
                                              engine_row(in.settings.engine).display_name));
  }
  auto est = planner(in);
  // What reading the model found (a variant's entry, config and checkpoint disagreeing) comes
  // first: it qualifies every figure.
  if (est)
    est->warnings.insert(est->warnings.begin(), in.model.warnings.begin(), in.model.warnings.end());
  return est;
}

Expected<std::string> parse_engine_version(Engine engine, std::string_view text) {
  if (const auto parse = engine_functions(engine).parse_release) return parse(text);
  if (trim(text).empty()) return std::string();
  std::vector<std::string_view> versioned;
  for (const auto& row : k_engine_functions) {
    if (row.parse_release != nullptr) versioned.push_back(engine_name(row.id));
  }
  return fail(ErrorKind::usage,
              fmt::format("--engine-version applies to --engine {}; kvprof models {} without "
                          "versions",
                          names_list(versioned), engine_name(engine)));
}

std::string modelled_engine_version(const estimate::EngineSettings& s) {
  const auto parse = engine_functions(s.engine).parse_release;
  if (parse == nullptr) return "(no version pinned)";
  if (auto v = parse(s.engine_version)) return *v;
  return parse("").value_or("");
}

std::string engine_versions_help() {
  return fmt::format(
      "Release whose memory rules to follow (default: vLLM v0.19, the newest checked against "
      "public startups; SGLang and TensorRT-LLM: the newest modelled). vLLM: {}. SGLang: {}. "
      "TensorRT-LLM: 1.x. llama.cpp: a build (b5640) or version (v0.4.0), rows {}. TGI: {}. "
      "Ollama: {} (with the llama.cpp each bundles). A patch release (v0.7.3, 0.4.7.post1) takes "
      "the rules of the row that covers it",
      vllm_supported_versions(), sglang_supported_versions(), llamacpp_supported_releases(),
      tgi_supported_releases(), ollama_supported_releases());
}

enginelog::ParseOptions log_parse_options(Engine engine) {
  enginelog::ParseOptions options;
  options.engine = engine;
  for (const Engine e : k_log_reading_order) {
    if (const auto make = engine_functions(e).log_reader) options.readers.push_back(make());
  }
  return options;
}

std::vector<std::string_view> log_read_engine_names() {
  std::vector<std::string_view> names;
  for (const auto& row : k_engine_functions) {
    if (row.log_reader != nullptr) names.push_back(engine_name(row.id));
  }
  return names;
}

metrics::MetricsSnapshot read_metrics(const metrics::Exposition& exposition) {
  metrics::MetricsSnapshot snap;
  snap.engine = metrics::guess_engine(exposition);
  if (const auto read = engine_functions(snap.engine).read_metrics) read(exposition, snap);
  // A share of the KV cache over 100% is not believed.
  if (snap.kv_cache_usage && *snap.kv_cache_usage > 1.0) snap.kv_cache_usage.reset();
  if (snap.kv_cache_usage) snap.kv_cache_source = metrics::KvSource::metrics;
  return snap;
}

std::optional<estimate::LaunchReading> read_launch_command(std::string_view command,
                                                           const estimate::EngineSettings& base) {
  const auto words = split_shell_words(command);
  if (!words) return std::nullopt;
  const std::span<const std::string> all(*words);
  size_t begin = 0;
  while (begin < all.size()) {
    size_t end = begin;
    while (end < all.size() && !is_shell_operator(all[end]))
      ++end;
    // Each word of a simple command may be the program (after VAR=x, env, timeout 60, ...).
    for (size_t k = begin; k < end; ++k) {
      for (const auto& row : k_engine_functions) {
        if (row.read_command == nullptr) continue;
        estimate::LaunchReading r;
        r.settings = base;
        if (row.read_command(all.subspan(k, end - k), r)) return r;
      }
    }
    begin = end + 1;
  }
  return std::nullopt;
}

}  // namespace kvprof::engines
