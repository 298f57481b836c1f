// The engine rows (see engine.hpp).
#include "kvprof/engines/engine.hpp"

#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

namespace {

constexpr std::array<std::string_view, 0> k_no_aliases{};
constexpr std::array<std::string_view, 3> k_trtllm_aliases{"tensorrt-llm", "tensorrt_llm",
                                                           "trt-llm"};
constexpr std::array<std::string_view, 3> k_llamacpp_aliases{"llama.cpp", "llama-cpp",
                                                             "llama-server"};
constexpr std::array<std::string_view, 2> k_hf_aliases{"transformers", "huggingface"};
constexpr std::array<std::string_view, 1> k_tgi_aliases{"text-generation-inference"};

// In the order of the enum.
constexpr std::array<EngineRow, 7> k_rows{{
    {Engine::unknown, "unknown", "an unknown engine", k_no_aliases, false, false, false, "", "",
     ""},
    {Engine::vllm, "vllm", "vLLM", k_no_aliases, true, true, true, "vllm:",
     "--tensor-parallel-size", "--pipeline-parallel-size"},
    {Engine::sglang, "sglang", "SGLang", k_no_aliases, true, true, true, "sglang:", "--tp-size",
     "--pp-size"},
    {Engine::trtllm, "trtllm", "TensorRT-LLM", k_trtllm_aliases, true, true, true, "", "--tp_size",
     "--pp_size"},
    {Engine::llamacpp, "llamacpp", "llama.cpp", k_llamacpp_aliases, true, false, true,
     "llamacpp:", "", ""},
    {Engine::hf, "hf", "HF transformers", k_hf_aliases, true, false, false, "", "", ""},
    {Engine::tgi, "tgi", "TGI", k_tgi_aliases, false, false, false, "tgi_", "", ""},
}};

}  // namespace

std::span<const EngineRow> engine_rows() {
  return k_rows;
}

const EngineRow& engine_row(Engine engine) {
  const auto i = static_cast<size_t>(engine);
  return i < k_rows.size() ? k_rows[i] : k_rows[0];
}

std::string_view engine_name(Engine engine) {
  return engine_row(engine).name;
}

std::optional<Engine> find_engine(std::string_view text) {
  const std::string s = to_lower(trim(text));
  for (const auto& row : k_rows) {
    if (s == row.name) return row.id;
    for (const auto alias : row.aliases) {
      if (s == alias) return row.id;
    }
  }
  return std::nullopt;
}

Expected<Engine> parse_planned_engine(std::string_view text) {
  const auto engine = find_engine(text);
  if (engine && engine_row(*engine).planned) return *engine;
  std::vector<std::string_view> planned;
  for (const auto& row : k_rows) {
    if (row.planned) planned.push_back(row.name);
  }
  std::string names;
  for (size_t i = 0; i < planned.size(); ++i)
    names += fmt::format("{}{}", i == 0 ? "" : i + 1 == planned.size() ? " or " : ", ", planned[i]);
  return fail(ErrorKind::usage, fmt::format("unknown engine '{}' (use {})", text, names));
}

}  // namespace kvprof::engines
