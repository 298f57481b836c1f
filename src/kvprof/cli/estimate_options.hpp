// The options of `kvprof estimate`, named like the engines' own flags, shared with
// `kvprof profile --estimate-with "FLAGS"`.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/estimate/estimate.hpp"
#include "kvprof/model/architecture.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::cli {

inline constexpr std::string_view k_default_model = "meta-llama/Llama-3.1-8B-Instruct";
inline constexpr std::string_view k_default_gpu = "H100";

struct EstimateOptions {
  std::string model{k_default_model};
  std::string gpu;
  std::string gpu_mem;
  std::string engine = "vllm";
  std::string engine_version;  // vLLM, SGLang or TensorRT-LLM release ("" = the newest)
  std::string hf_token;        // the Hub's token for gated repos (never written anywhere)
  bool offline = false;        // the local Hugging Face cache only
  std::string revision;        // the Hub revision (branch, tag or commit)
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t dp = 1;
  bool expert_parallel = false;
  bool dp_attention = false;
  uint32_t ep_size = 1;
  std::string moe_a2a_backend;
  std::optional<uint32_t> moe_dense_tp_size;
  bool dp_lm_head = false;
  std::optional<double> memory_fraction;
  std::string max_model_len;
  std::string max_input_tokens;  // TGI --max-input-tokens
  std::optional<uint32_t> max_num_seqs;
  std::optional<uint32_t> max_num_batched_tokens;
  std::optional<uint32_t> cuda_graph_max_bs;
  std::optional<uint32_t> block_size;
  std::string dtype = "auto";
  std::string quantization;
  std::string kv_cache_dtype = "auto";
  bool enforce_eager = false;
  std::string kv_cache_memory;
  std::optional<double> cpu_offload_gib;    // vLLM --cpu-offload-gb
  std::optional<double> swap_space_gib;     // vLLM --swap-space
  std::optional<double> kv_offloading_gib;  // vLLM --kv-offloading-size
  std::string kv_transfer_config;           // vLLM --kv-transfer-config
  std::optional<uint32_t> num_gpu_blocks_override;
  std::optional<uint32_t> n_gpu_layers;
  std::string tensor_split;                  // -ts 3,1
  std::vector<std::string> override_tensor;  // -ot PATTERN=BUFT[,...], each flag adding
  bool cpu_moe = false;                      // --cpu-moe
  std::optional<uint32_t> n_cpu_moe;         // --n-cpu-moe N
  std::string flash_attn = "auto";
  std::optional<uint32_t> n_parallel;  // -np; unset: 1 (Ollama: its own default)
  uint32_t n_ubatch = 512;
  uint32_t n_batch = 2048;
  std::string cache_type_k;
  std::string cache_type_v;
  bool no_mmap = false;
  bool swa_full = false;
  bool no_op_offload = false;
  bool no_kv_unified = false;
  std::string device;               // llama.cpp -dev CUDA0,CUDA1 | none
  std::string fit;                  // llama.cpp --fit on|off ("" = off)
  std::string fit_target_mib;       // --fit-target MiB[,MiB...]
  std::optional<uint32_t> fit_ctx;  // --fit-ctx
  std::string host_mem;
  std::string gpu_overhead;  // Ollama's OLLAMA_GPU_OVERHEAD
  std::string speculative_model;
  uint32_t num_speculative_tokens = 0;
  bool spec_runtime_control = false;
  std::vector<std::string> contexts;
  std::vector<uint32_t> concurrency;
  model::ArchitectureHints architecture;  // --num-layers ...: checked, or describing a model
};

// Adds --model-params, --num-layers, --num-heads, --num-kv-heads, --head-dim, --hidden-size,
// --intermediate-size and --vocab-size to `cmd`, bound to `h`.
void add_architecture_options(CLI::App* cmd, model::ArchitectureHints& h);

// Adds the model, GPU, engine, parallelism, engine-settings, speculative-decoding and workload
// options to `cmd`, bound to `o`.
void add_estimate_options(CLI::App* cmd, EstimateOptions& o);

// The estimator input `o` describes; throws Fatal (usage / not_found / input) for bad values.
estimate::EstimateInput build_estimate_input(const EstimateOptions& o);

// Parses engine flags given as one string ("-tp 2 --gpu-memory-utilization 0.85 --model X")
// on top of `defaults`; a usage error naming a bad flag, or the error build_estimate_input gives.
Expected<estimate::EstimateInput> parse_estimate_flags(std::string_view flags,
                                                       EstimateOptions defaults);

// The long names (without dashes: "gpu-memory-utilization") of the options `flags` sets, as
// parse_estimate_flags reads them; empty when they do not parse.
// The long names of the options of `cmd` (and its option groups) given on its command line.
std::set<std::string> flags_given(const CLI::App& cmd);

std::set<std::string> estimate_flags_given(std::string_view flags);

// Rewrites "--estimate-with FLAGS" as "--estimate-with=FLAGS" and "--compare A B" as
// "--compare=A --compare=B", so a flag string that starts with a dash ("--enforce-eager") or is
// empty stays the option's value instead of being read as an option of its own.
std::vector<std::string> attach_flag_strings(std::vector<std::string> args);

// Rewrites the engines' one-dash multi-letter flags (-tp, -pp, -dp, -ngl, -np, -fa, -ub, -c,
// -ctk, -ctv) to the long forms CLI11 understands, and gives a bare -fa its value "on".
std::vector<std::string> normalize_short_flags(std::vector<std::string> args);

}  // namespace kvprof::cli
