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

// Container images: vllm/vllm-openai, rocm/vllm; lmsysorg/sglang; nvcr.io/nvidia/tensorrt-llm
// (and tritonserver's trtllm builds); ghcr.io/ggml-org/llama.cpp:server; ghcr.io/huggingface/
// text-generation-inference.
constexpr std::array<std::string_view, 1> k_vllm_images{"vllm"};
constexpr std::array<std::string_view, 1> k_sglang_images{"sglang"};
constexpr std::array<std::string_view, 3> k_trtllm_images{"tensorrt-llm", "tensorrt_llm", "trtllm"};
constexpr std::array<std::string_view, 3> k_llamacpp_images{"llama.cpp", "llama-cpp", "llamacpp"};
constexpr std::array<std::string_view, 2> k_tgi_images{"text-generation-inference", "/tgi"};
constexpr std::array<std::string_view, 1> k_ollama_images{"ollama"};

// In the order of the enum.
constexpr std::array<EngineRow, 8> k_engine_rows{{
    {Engine::unknown, "unknown", "an unknown engine", k_no_aliases, "", "", "", KvAllocation::grows,
     false, 0, k_no_aliases},
    {Engine::vllm, "vllm", "vLLM", k_no_aliases, "vllm:", "--tensor-parallel-size",
     "--pipeline-parallel-size", KvAllocation::paged_pool, true, 8000, k_vllm_images},
    {Engine::sglang, "sglang", "SGLang", k_no_aliases, "sglang:", "--tp-size", "--pp-size",
     KvAllocation::paged_pool, false, 30000, k_sglang_images},
    {Engine::trtllm, "trtllm", "TensorRT-LLM", k_trtllm_aliases, "", "--tp_size", "--pp_size",
     KvAllocation::paged_pool, true, 8000, k_trtllm_images},
    {Engine::llamacpp, "llamacpp", "llama.cpp", k_llamacpp_aliases, "llamacpp:", "", "",
     KvAllocation::cells, false, 8080, k_llamacpp_images},
    {Engine::hf, "hf", "HF transformers", k_hf_aliases, "", "", "", KvAllocation::grows, false, 0,
     k_no_aliases},
    {Engine::tgi, "tgi", "TGI", k_tgi_aliases, "tgi_", "--num-shard", "", KvAllocation::paged_pool,
     true, 80, k_tgi_images},
    {Engine::ollama, "ollama", "Ollama", k_no_aliases, "", "", "", KvAllocation::cells, false,
     11434, k_ollama_images},
}};

}  // namespace

std::span<const EngineRow> engine_rows() {
  return k_engine_rows;
}

const EngineRow& engine_row(Engine engine) {
  const auto i = static_cast<size_t>(engine);
  return i < k_engine_rows.size() ? k_engine_rows[i] : k_engine_rows[0];
}

std::string_view engine_name(Engine engine) {
  return engine_row(engine).name;
}

std::optional<Engine> find_engine(std::string_view text) {
  const std::string s = to_lower(trim(text));
  for (const auto& row : k_engine_rows) {
    if (s == row.name) return row.id;
    for (const auto alias : row.aliases) {
      if (s == alias) return row.id;
    }
  }
  return std::nullopt;
}

std::optional<Engine> engine_of_image(std::string_view image) {
  const std::string s = to_lower(image);
  // The longer words first and "vllm" last: Triton's "tritonserver:24.05-trtllm-python-py3"
  // is TensorRT-LLM whatever else its name holds.
  for (const Engine e :
       {Engine::trtllm, Engine::sglang, Engine::llamacpp, Engine::tgi, Engine::vllm}) {
    for (const auto word : engine_row(e).image_words) {
      if (s.find(word) != std::string::npos) return e;
    }
  }
  return std::nullopt;
}

}  // namespace kvprof::engines
