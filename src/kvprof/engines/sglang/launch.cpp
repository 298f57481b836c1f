// SGLang's server flags read into a plan's settings (see launch_reading.hpp):
// `python -m sglang.launch_server --model-path MODEL` (and `sglang serve`), with the flags that
// decide its memory. Flags kvprof does not plan are left to the caller's settings.
#include <charconv>

#include "kvprof/engines/sglang/sglang.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/model/dtype.hpp"
#include "kvprof/util/command_flags.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

namespace {

// Where SGLang's own arguments start in `words`, or 0 when the program is not SGLang's server.
size_t sglang_args_start(std::span<const std::string> words) {
  const auto program = program_name(words.front());
  if (program == "sglang" && words.size() > 1 && words[1] == "serve") return 2;
  return python_module_args_start(words, "sglang.launch_server");
}

}  // namespace

bool read_sglang_command(std::span<const std::string> words, estimate::LaunchReading& out) {
  if (words.empty()) return false;
  const size_t start = sglang_args_start(words);
  if (start == 0) return false;
  out.program = "sglang.launch_server";
  auto& s = out.settings;
  s.engine = Engine::sglang;
  FlagWalk w(words.subspan(start));
  while (w.next()) {
    if (w.is({"--model-path", "--model"})) {
      out.model = w.value().value_or("");
    } else if (w.is({"--tp", "--tp-size", "--tensor-parallel-size"})) {
      if (auto n = read_count(w.value()); n && *n > 0) s.tensor_parallel_size = *n;
    } else if (w.is({"--pp", "--pp-size", "--pipeline-parallel-size"})) {
      if (auto n = read_count(w.value()); n && *n > 0) s.pipeline_parallel_size = *n;
    } else if (w.is({"--dp", "--dp-size", "--data-parallel-size"})) {
      if (auto n = read_count(w.value()); n && *n > 0) s.data_parallel_size = *n;
    } else if (w.is({"--context-length"})) {
      if (auto n = read_count(w.value()); n && *n > 0) s.max_model_len = *n;
    } else if (w.is({"--mem-fraction-static"})) {
      if (const auto u = read_number(w.value())) s.gpu_memory_utilization = u;
    } else if (w.is({"--max-running-requests"})) {
      set_positive_count(s.max_num_seqs, w.value());
    } else if (w.is({"--chunked-prefill-size"})) {
      set_positive_count(s.max_num_batched_tokens, w.value());
    } else if (w.is({"--page-size"})) {
      set_positive_count(s.block_size, w.value());
    } else if (w.is({"--cuda-graph-max-bs"})) {
      set_positive_count(s.cuda_graph_max_bs, w.value());
    } else if (w.is({"--disable-cuda-graph"})) {
      s.enforce_eager = true;
    } else if (w.is({"--kv-cache-dtype"})) {
      if (auto kv = estimate::parse_kv_cache_dtype(w.value().value_or(""))) s.kv_cache_dtype = *kv;
    } else if (w.is({"--dtype"})) {
      const auto v = to_lower(w.value().value_or("auto"));
      if (v != "auto") {
        if (auto d = model::parse_dtype(v)) s.dtype = *d;
      }
    } else if (w.is({"--quantization"})) {
      s.quantization = w.value().value_or("");
    }
  }
  return true;
}

}  // namespace kvprof::engines
