// vLLM's server flags read into a plan's settings (see launch_reading.hpp): `vllm serve MODEL`
// and `python -m vllm.entrypoints.openai.api_server --model MODEL`, with the flags that decide
// its memory. Flags kvprof does not plan are left to the caller's settings.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "kvprof/engines/vllm/vllm.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/model/dtype.hpp"
#include "kvprof/util/command_flags.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

namespace {

// Where vLLM's own arguments start in `words`, or 0 when the program is not vLLM's server.
size_t vllm_args_start(std::span<const std::string> words) {
  const auto program = program_name(words.front());
  if (program == "vllm" && words.size() > 1 && words[1] == "serve") return 2;
  return python_module_args_start(words, "vllm.entrypoints.openai.api_server");
}

}  // namespace

bool read_vllm_command(std::span<const std::string> words, estimate::LaunchReading& out) {
  if (words.empty()) return false;
  const size_t start = vllm_args_start(words);
  if (start == 0) return false;
  out.program = start == 2 ? "vllm serve" : "vllm api_server";
  auto& s = out.settings;
  s.engine = Engine::vllm;
  auto args = words.subspan(start);
  if (start == 2 && !args.empty() && !args.front().starts_with("-")) {
    out.model = args.front();  // vllm serve MODEL
    args = args.subspan(1);
  }
  FlagWalk w(args);
  while (w.next()) {
    if (w.is({"--model"})) {
      out.model = w.value().value_or("");
    } else if (w.is({"-tp", "--tensor-parallel-size"})) {
      if (auto n = read_count(w.value()); n && *n > 0) {
        s.tensor_parallel_size = *n;
        out.given.insert("tensor-parallel-size");
      }
    } else if (w.is({"-pp", "--pipeline-parallel-size"})) {
      if (auto n = read_count(w.value()); n && *n > 0) s.pipeline_parallel_size = *n;
    } else if (w.is({"-dp", "--data-parallel-size"})) {
      if (auto n = read_count(w.value()); n && *n > 0) s.data_parallel_size = *n;
    } else if (w.is({"--enable-expert-parallel"})) {
      s.enable_expert_parallel = true;
    } else if (w.is({"--max-model-len"})) {
      if (auto n = parse_count(w.value().value_or("")); n && *n > 0) {
        s.max_model_len = *n;
        out.given.insert("max-model-len");
      }
    } else if (w.is({"--gpu-memory-utilization"})) {
      if (const auto u = read_number(w.value())) {
        s.gpu_memory_utilization = u;
        out.given.insert("gpu-memory-utilization");
      }
    } else if (w.is({"--max-num-seqs"})) {
      set_positive_count(s.max_num_seqs, w.value());
    } else if (w.is({"--max-num-batched-tokens"})) {
      set_positive_count(s.max_num_batched_tokens, w.value());
    } else if (w.is({"--block-size"})) {
      set_positive_count(s.block_size, w.value());
    } else if (w.is({"--kv-cache-dtype"})) {
      if (auto kv = estimate::parse_kv_cache_dtype(w.value().value_or(""))) s.kv_cache_dtype = *kv;
    } else if (w.is({"--dtype"})) {
      const auto v = to_lower(w.value().value_or("auto"));
      if (v != "auto") {
        if (auto d = model::parse_dtype(v)) s.dtype = *d;
      }
    } else if (w.is({"-q", "--quantization"})) {
      s.quantization = w.value().value_or("");
    } else if (w.is({"--enforce-eager"})) {
      s.enforce_eager = true;
      out.given.insert("enforce-eager");
    } else if (w.is({"--kv-cache-memory", "--kv-cache-memory-bytes"})) {
      if (auto b = parse_bytes(w.value().value_or(""))) s.kv_cache_memory_bytes = *b;
    } else if (w.is({"--num-gpu-blocks-override"})) {
      set_positive_count(s.num_gpu_blocks_override, w.value());
    }
  }
  return true;
}

}  // namespace kvprof::engines
