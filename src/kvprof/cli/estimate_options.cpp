// The shared estimate options (see estimate_options.hpp).
#include "kvprof/cli/estimate_options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <utility>

#include "kvprof/cli/suggest.hpp"
#include "kvprof/engines/llamacpp/tensor_overrides.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {

namespace {

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    for (auto& part : split(item, ',')) {
      if (!trim(part).empty()) out.push_back(trim(part));
    }
  }
  return out;
}

// A machine's memory from `text` ("24GiB", "80GB", "25769803776"); a usage error for anything
// else, and for a count under 1 MiB, which a number without its unit ("24") would give.
uint64_t machine_memory_or_fatal(std::string_view flag, const std::string& text) {
  const auto bytes = parse_bytes(text);
  if (!bytes || *bytes == 0) {
    throw Fatal(
        {ErrorKind::usage, fmt::format("{}: '{}' is not a memory size", flag, text.substr(0, 64))});
  }
  if (*bytes < k_mib) {
    throw Fatal(
        {ErrorKind::usage, fmt::format("{}: '{}' is {} bytes; give the unit, e.g. {}GiB", flag,
                                       text.substr(0, 64), *bytes, text.substr(0, 16))});
  }
  return *bytes;
}

}  // namespace

estimate::EstimateInput build_estimate_input(const EstimateOptions& o) {
  estimate::EstimateInput in;
  model::LoadOptions load;
  if (!o.hf_token.empty()) load.hub.token = o.hf_token;
  if (o.offline) load.hub.offline = true;
  if (!o.revision.empty()) load.hub.revision = o.revision;
  auto loaded = model::load_model(o.model, load);
  if (!loaded && loaded.error().kind == ErrorKind::not_found &&
      o.architecture.describes_a_model()) {
    // A model kvprof cannot read, described by the architecture given.
    std::vector<std::string> notes;
    const auto max_len =
        o.max_model_len.empty() ? Expected<uint64_t>(4096) : parse_count(o.max_model_len);
    in.model =
        value_or_fatal(model::model_from_hints(o.model, o.architecture, max_len.value_or(4096),
                                               o.dtype == "auto" ? "bfloat16" : o.dtype, notes));
    notes.insert(notes.begin(), fmt::format("'{}' is not known to kvprof: planned from the "
                                            "architecture given (a Llama-like dense model)",
                                            o.model));
    in.model.warnings.insert(in.model.warnings.begin(), notes.begin(), notes.end());
  } else {
    in.model = value_or_fatal(std::move(loaded));
    for (auto& note : model::check_hints(in.model, o.architecture))
      in.model.warnings.push_back(std::move(note));
  }
  if (gpu::names_no_gpu(o.gpu)) {
    // A CPU-only deployment (llama.cpp): no GPU; host RAM is the budget.
    in.gpu = gpu::no_gpu();
    in.settings.no_gpu = true;
  } else if (!o.gpu_mem.empty()) {
    const uint64_t bytes = machine_memory_or_fatal("--gpu-mem", o.gpu_mem);
    in.gpu = o.gpu.empty() ? gpu::custom_gpu(bytes) : value_or_fatal(gpu::find_gpu(o.gpu));
    in.gpu.memory_bytes = bytes;
  } else {
    in.gpu = value_or_fatal(gpu::find_gpu(o.gpu.empty() ? std::string(k_default_gpu) : o.gpu));
  }
  auto& s = in.settings;
  s.engine = value_or_fatal(engines::parse_planned_engine(o.engine));
  if (!o.engine_version.empty()) {
    s.engine_version = value_or_fatal(engines::parse_engine_version(s.engine, o.engine_version));
  }
  s.tensor_parallel_size = o.tp;
  s.pipeline_parallel_size = o.pp;
  s.data_parallel_size = o.dp;
  s.enable_expert_parallel =
      o.expert_parallel || estimate::moe_backend_splits_experts(o.moe_a2a_backend);
  s.enable_dp_attention = o.dp_attention;
  s.expert_parallel_size = o.ep_size;
  s.moe_dense_tp_size = o.moe_dense_tp_size;
  s.enable_dp_lm_head = o.dp_lm_head;
  if (s.enable_dp_attention && (o.dp < 2 || o.tp % o.dp != 0)) {
    throw Fatal({ErrorKind::usage,
                 fmt::format("--enable-dp-attention: --dp-size {} must be 2 or more and divide "
                             "--tp-size {} (the tp GPUs hold the dp attention replicas)",
                             o.dp, o.tp)});
  }
  const bool sglang_split = s.enable_dp_attention || o.ep_size > 1 || o.moe_dense_tp_size ||
                            o.dp_lm_head || !o.moe_a2a_backend.empty();
  if (sglang_split && s.engine != engines::Engine::sglang && s.engine != engines::Engine::trtllm) {
    throw Fatal({ErrorKind::usage,
                 fmt::format("--enable-dp-attention, --ep-size, --moe-a2a-backend, "
                             "--moe-dense-tp-size and --enable-dp-lm-head are SGLang's (and "
                             "TensorRT-LLM's attention DP): not --engine {}",
                             engines::engine_name(s.engine))});
  }
  if (o.ep_size > 1 && o.tp % o.ep_size != 0) {
    throw Fatal(
        {ErrorKind::usage, fmt::format("--ep-size {} must divide --tp-size {}", o.ep_size, o.tp)});
  }
  s.gpu_memory_utilization = o.memory_fraction;
  if (!o.max_model_len.empty()) {
    auto n = parse_count(o.max_model_len);
    if (!n) throw Fatal({ErrorKind::usage, "--max-model-len: " + n.error().message});
    s.max_model_len = *n;
  }
  if (!o.max_input_tokens.empty()) {
    auto n = parse_count(o.max_input_tokens);
    if (!n || *n == 0)
      throw Fatal({ErrorKind::usage, fmt::format("--max-input-tokens: '{}' is not a token count",
                                                 o.max_input_tokens)});
    s.max_input_tokens = *n;
  }
  s.max_num_seqs = o.max_num_seqs;
  const auto gib_bytes = [](std::optional<double> gib) -> std::optional<uint64_t> {
    if (!gib) return std::nullopt;
    return static_cast<uint64_t>(*gib * static_cast<double>(1ULL << 30));
  };
  s.cpu_offload_bytes = gib_bytes(o.cpu_offload_gib);
  s.swap_space_bytes = gib_bytes(o.swap_space_gib);
  s.kv_offloading_bytes = gib_bytes(o.kv_offloading_gib);
  s.kv_transfer_config = o.kv_transfer_config;
  s.max_num_batched_tokens = o.max_num_batched_tokens;
  s.cuda_graph_max_bs = o.cuda_graph_max_bs;
  s.block_size = o.block_size;
  if (to_lower(o.dtype) != "auto") {
    auto d = model::parse_dtype(o.dtype);
    if (!d) {
      throw Fatal({ErrorKind::usage,
                   fmt::format("--dtype '{}' (use auto, bfloat16, float16, float32)", o.dtype)});
    }
    s.dtype = *d;
  }
  s.quantization = o.quantization;
  s.kv_cache_dtype = value_or_fatal(estimate::parse_kv_cache_dtype(o.kv_cache_dtype));
  s.enforce_eager = o.enforce_eager;
  if (!o.kv_cache_memory.empty()) {
    auto b = parse_bytes(o.kv_cache_memory);
    if (!b) throw Fatal({ErrorKind::usage, "--kv-cache-memory: " + b.error().message});
    s.kv_cache_memory_bytes = *b;
  }
  s.num_gpu_blocks_override = o.num_gpu_blocks_override;
  s.n_gpu_layers = o.n_gpu_layers;
  for (const auto& part : split_list({o.tensor_split})) {
    double share = 0;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), share);
    if (ec != std::errc{} || p != part.data() + part.size() || !(share >= 0)) {
      throw Fatal({ErrorKind::usage,
                   fmt::format("-ts: '{}' is not a share (use numbers >= 0, e.g. -ts 3,1)", part)});
    }
    s.tensor_split.push_back(share);
  }
  // llama.cpp's overrides in its order of loading: -ot, then --cpu-moe, then --n-cpu-moe.
  for (const auto& value : o.override_tensor) {
    auto overrides = value_or_fatal(engines::parse_override_tensor(value));
    s.tensor_overrides.insert(s.tensor_overrides.end(), overrides.begin(), overrides.end());
  }
  if (o.cpu_moe) s.tensor_overrides.push_back(engines::cpu_moe_override());
  if (o.n_cpu_moe) {
    auto overrides = value_or_fatal(engines::n_cpu_moe_overrides(*o.n_cpu_moe));
    s.tensor_overrides.insert(s.tensor_overrides.end(), overrides.begin(), overrides.end());
  }
  if (!s.tensor_overrides.empty() && s.engine != engines::Engine::llamacpp) {
    throw Fatal({ErrorKind::usage,
                 "-ot, --cpu-moe and --n-cpu-moe place llama.cpp's tensors (--engine llamacpp)"});
  }
  if (!s.tensor_split.empty() && s.engine != engines::Engine::llamacpp) {
    throw Fatal({ErrorKind::usage,
                 "-ts splits layers over GPUs in llama.cpp (--engine llamacpp); "
                 "vLLM, SGLang and TensorRT-LLM use -tp/-pp"});
  }
  const std::string fa = to_lower(o.flash_attn);
  if (fa != "on" && fa != "off" && fa != "auto" && fa != "1" && fa != "0") {
    throw Fatal(
        {ErrorKind::usage, fmt::format("--flash-attn: '{}' (use on, off or auto)", o.flash_attn)});
  }
  // auto: llama.cpp turns it on where the backend supports it, as CUDA and the CPU do.
  s.flash_attn = fa != "off" && fa != "0";
  s.flash_attn_auto = fa == "auto";
  s.n_parallel = std::max<uint32_t>(o.n_parallel.value_or(1), 1);
  s.n_parallel_given = o.n_parallel.has_value();
  s.n_ubatch = std::max<uint32_t>(o.n_ubatch, 1);
  s.n_batch = std::max<uint32_t>(o.n_batch, 1);
  s.cache_type_k = o.cache_type_k;
  s.cache_type_v = o.cache_type_v;
  s.use_mmap = !o.no_mmap;
  s.swa_full = o.swa_full;
  s.op_offload = !o.no_op_offload;
  s.kv_unified = !o.no_kv_unified;
  if (!o.device.empty()) {
    const auto devices = value_or_fatal(engines::parse_device_list(o.device));
    if (devices.empty()) {
      // -dev none: llama.cpp offloads nothing, whatever the machine has.
      in.gpu = gpu::no_gpu();
      s.no_gpu = true;
    } else if (devices.size() > 1) {
      s.n_devices = static_cast<uint32_t>(devices.size());  // llama.cpp splits over them
    }
  }
  if (!o.fit.empty()) {
    const std::string f = to_lower(o.fit);
    if (f != "on" && f != "off") {
      throw Fatal({ErrorKind::usage, fmt::format("--fit: '{}' (use on or off)", o.fit)});
    }
    s.fit = f == "on";
  }
  if (!o.fit_target_mib.empty()) {
    // One value per device in llama.cpp; kvprof plans the busiest GPU with the first.
    const auto first = trim(split(o.fit_target_mib, ',').front());
    const auto mib_count = parse_count(first);
    if (!mib_count || *mib_count > (1ULL << 30)) {
      throw Fatal(
          {ErrorKind::usage, fmt::format("--fit-target: '{}' is not MiB", o.fit_target_mib)});
    }
    s.fit_target_bytes = *mib_count << 20;
  }
  if (o.fit_ctx) s.fit_ctx = *o.fit_ctx;
  if (!o.gpu_overhead.empty()) {
    auto b = parse_bytes(o.gpu_overhead);
    if (!b) {
      throw Fatal({ErrorKind::usage, fmt::format("--gpu-overhead (OLLAMA_GPU_OVERHEAD): '{}' is "
                                                 "not a memory size (bytes, or 2GiB)",
                                                 o.gpu_overhead.substr(0, 64))});
    }
    s.ollama_gpu_overhead_bytes = *b;
  }
  if (!o.host_mem.empty()) s.host_memory_bytes = machine_memory_or_fatal("--host-mem", o.host_mem);
  s.speculative_model = o.speculative_model;
  s.num_speculative_tokens = o.num_speculative_tokens;
  s.spec_runtime_control = o.spec_runtime_control;
  if (!o.speculative_model.empty()) {
    in.draft = value_or_fatal(model::load_model(o.speculative_model, load));
    if (s.num_speculative_tokens == 0) s.num_speculative_tokens = 4;
  }
  for (const auto& c : split_list(o.contexts)) {
    auto n = parse_count(c);
    if (!n || *n == 0)
      throw Fatal({ErrorKind::usage, fmt::format("--context: '{}' is not a token count", c)});
    in.workload.context_tokens.push_back(*n);
  }
  for (uint32_t c : o.concurrency) {
    if (c == 0) throw Fatal({ErrorKind::usage, "--concurrency must be at least 1"});
    in.workload.concurrency.push_back(c);
  }
  return in;
}

void add_architecture_options(CLI::App* cmd, model::ArchitectureHints& h) {
  auto* arch = cmd->add_option_group(
      "model architecture (checked against the model; describes one kvprof cannot read)");
  arch->add_option("--model-params", h.params, "Parameters, e.g. 6.7e9");
  arch->add_option("--num-layers", h.n_layer, "Transformer layers");
  arch->add_option("--num-heads", h.n_head, "Attention heads");
  arch->add_option("--num-kv-heads", h.n_head_kv, "KV heads (default: --num-heads)");
  arch->add_option("--head-dim", h.head_dim, "Head dimension (default: hidden size / heads)");
  arch->add_option("--hidden-size", h.hidden_size, "Hidden size");
  arch->add_option("--intermediate-size", h.intermediate_size,
                   "MLP width (default: from --model-params, else 8/3 x hidden size)");
  arch->add_option("--vocab-size", h.vocab_size, "Vocabulary (default 32000)");
}

void add_estimate_options(CLI::App* cmd, EstimateOptions& o) {
  cmd->add_option("-m,--model", o.model,
                  "Catalog id or alias, config.json, model folder (safetensors headers), .gguf, "
                  "or any Hugging Face id (config.json and safetensors headers from the local "
                  "HF cache or the Hub; HF_ENDPOINT for a mirror)")
      ->envname("KVPROF_MODEL")
      ->capture_default_str();
  auto* hub = cmd->add_option_group("Hugging Face Hub");
  hub->add_option("--hf-token", o.hf_token, "Token for gated or private models (default: HF_TOKEN)")
      ->envname("HF_TOKEN");
  hub->add_flag("--offline", o.offline,
                "Read only the local Hugging Face cache (also HF_HUB_OFFLINE=1)");
  hub->add_option("--revision", o.revision, "Hub branch, tag or commit (default: main)");
  cmd->add_option("-g,--gpu", o.gpu, "GPU as people write it: H100, h100-sxm, A100-80GB, 4090 ...")
      ->envname("KVPROF_GPU");
  cmd->add_option("--gpu-mem", o.gpu_mem, "Usable memory of a GPU not in the catalog, e.g. 24GiB");
  cmd->add_option("--engine", o.engine, "vllm | sglang | trtllm | llamacpp | hf | tgi | ollama")
      ->capture_default_str();
  cmd->add_option("--engine-version", o.engine_version, engines::engine_versions_help())
      ->envname("KVPROF_ENGINE_VERSION");
  auto* par = cmd->add_option_group("parallelism");
  par->add_option("--tensor-parallel-size,--tp,--tp-size,--tp_size,--num-shard", o.tp,
                  "Tensor parallel size (vLLM -tp, SGLang --tp-size, TensorRT-LLM --tp_size, TGI "
                  "--num-shard)")
      ->check(CLI::Range(1, 1024));
  par->add_option("--pipeline-parallel-size,--pp,--pp-size,--pp_size", o.pp,
                  "Pipeline parallel size (vLLM -pp, SGLang --pp-size, TensorRT-LLM --pp_size)")
      ->check(CLI::Range(1, 1024));
  par->add_option("--data-parallel-size,--dp,--dp-size", o.dp,
                  "Data parallel size (vLLM -dp, SGLang --dp-size)")
      ->check(CLI::Range(1, 4096));
  par->add_flag("--enable-expert-parallel,--enable-ep-moe", o.expert_parallel,
                "Whole MoE experts per GPU: vLLM over TP x DP ranks, SGLang (--enable-ep-moe) over "
                "its --tp-size GPUs");
  par->add_flag("--enable-dp-attention", o.dp_attention,
                "SGLang: --dp-size attention replicas inside the --tp-size GPUs, each with its own "
                "KV pool (--tp-size counts every GPU)");
  par->add_option("--ep-size,--expert-parallel-size", o.ep_size,
                  "SGLang: whole MoE experts over this many of the --tp-size GPUs")
      ->check(CLI::Range(1, 4096));
  par->add_option("--moe-a2a-backend", o.moe_a2a_backend,
                  "SGLang: deepep or mooncake put whole experts on each of the --tp-size GPUs");
  par->add_option("--moe-dense-tp-size", o.moe_dense_tp_size,
                  "SGLang: TP width of the dense MLP layers (1: replicated on every GPU)")
      ->check(CLI::Range(1, 4096));
  par->add_flag("--enable-dp-lm-head", o.dp_lm_head,
                "SGLang: the LM head split over each attention replica's GPUs only");
  auto* eng = cmd->add_option_group("engine settings");
  eng->add_option(
      "--gpu-memory-utilization,--mem-fraction-static,--free-gpu-memory-fraction,--kv_cache_free_"
      "gpu_memory_fraction,--cuda-memory-fraction",
      o.memory_fraction,
      "vLLM gpu_memory_utilization (0.9) / SGLang mem_fraction_static / TRT-LLM "
      "free_gpu_memory_fraction / TGI cuda_memory_fraction (1.0)");
  eng->add_option(
      "--max-model-len,--ctx-size,--context-length,--max_seq_len,--max-total-tokens,--num-ctx",
      o.max_model_len,
      "Max tokens per request (llama.cpp -c, SGLang --context-length, TensorRT-LLM --max_seq_len, "
      "TGI --max-total-tokens, Ollama num_ctx / OLLAMA_CONTEXT_LENGTH: per slot); "
      "32k is 32000 and 32K 32768, as vLLM reads them; default: the model's");
  eng->add_option("--max-input-tokens,--max-input-length", o.max_input_tokens,
                  "TGI: longest prompt (default: its release's, from the model and the warmup)");
  eng->add_option("--max-num-seqs,--max-running-requests,--max_batch_size,--max-batch-size",
                  o.max_num_seqs, "Max sequences per batch");
  eng->add_option(
      "--max-num-batched-tokens,--chunked-prefill-size,--max_num_tokens,--max-batch-prefill-tokens",
      o.max_num_batched_tokens,
      "Token budget per step (profile-run size; TGI: its warmup prefill)");
  eng->add_option("--block-size,--page-size,--tokens_per_block", o.block_size,
                  "KV block size in tokens (vLLM --block-size 16, SGLang --page-size, TensorRT-LLM "
                  "tokens_per_block)");
  eng->add_option("--dtype", o.dtype, "auto | bfloat16 | float16 | float32")->capture_default_str();
  eng->add_option("-q,--quantization,--quantize", o.quantization,
                  "Checkpoint method (awq, gptq_marlin, compressed-tensors, ...), runtime fp8, a "
                  "what-if method on an unquantized model (awq, gptq, w4a16, w8a8, nvfp4, mxfp4, "
                  "bnb-4bit) or, with --engine llamacpp, a GGUF mix (Q4_K_M, Q8_0, ...)");
  eng->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                  "auto | fp16 | bf16 | fp8 | fp8_e5m2 | q8_0 | q4_0")
      ->capture_default_str();
  eng->add_option("--cuda-graph-max-bs", o.cuda_graph_max_bs,
                  "SGLang: largest CUDA-graph batch size (default: the release's, by GPU memory)");
  eng->add_flag("--enforce-eager,--disable-cuda-graph", o.enforce_eager,
                "No CUDA graphs (SGLang --disable-cuda-graph)");
  eng->add_option("--kv-cache-memory", o.kv_cache_memory, "vLLM: fixed KV cache size, e.g. 20GiB");
  eng->add_option("--cpu-offload-gb", o.cpu_offload_gib,
                  "vLLM: GiB of each GPU's weights kept in pinned host memory")
      ->check(CLI::Range(0.0, 1e6));
  eng->add_option("--swap-space", o.swap_space_gib,
                  "vLLM V0 (before v0.8): GiB of host swap space per GPU (default 4)")
      ->check(CLI::Range(0.0, 1e6));
  eng->add_option("--kv-offloading-size", o.kv_offloading_gib,
                  "vLLM: GiB of KV cache offloaded to host memory, over all TP ranks")
      ->check(CLI::Range(0.0, 1e6));
  eng->add_option("--kv-transfer-config", o.kv_transfer_config,
                  "vLLM: a KV connector's JSON (LMCache, NIXL, ...): its GPU buffers are not "
                  "planned, and the plan says so");
  eng->add_option("--num-gpu-blocks-override", o.num_gpu_blocks_override,
                  "vLLM: force the block count");
  eng->add_option("--n-gpu-layers,--ngl,--num-gpu", o.n_gpu_layers,
                  "llama.cpp -ngl: layers offloaded to the GPU (Ollama num_gpu; default: its "
                  "estimate's)");
  eng->add_option("--tensor-split,--ts", o.tensor_split,
                  "llama.cpp -ts: each GPU's share of the offloaded layers, e.g. 3,1 (two GPUs of "
                  "--gpu; all 0 or absent: an even split)");
  eng->add_option("--override-tensor,--ot", o.override_tensor,
                  "llama.cpp -ot PATTERN=BUFFER_TYPE[,...]: tensors whose name matches the regular "
                  "expression go to CPU or CUDA<n> (first match wins), e.g. "
                  "\"blk\\.(1[0-9])\\.ffn_.*_exps=CPU\"");
  eng->add_flag("--cpu-moe,--cmoe", o.cpu_moe,
                "llama.cpp --cpu-moe: every MoE layer's experts stay in host memory");
  eng->add_option("--n-cpu-moe,--ncmoe", o.n_cpu_moe,
                  "llama.cpp --n-cpu-moe N: the experts of the first N layers stay in host memory");
  eng->add_option("--flash-attn,--fa", o.flash_attn,
                  "llama.cpp -fa: on | off | auto (on from b6325, when auto became the default; "
                  "off before); Ollama's OLLAMA_FLASH_ATTENTION (auto: its release's default)")
      ->capture_default_str();
  eng->add_option("--parallel,--np,--num-parallel", o.n_parallel,
                  "llama.cpp -np: slots (1); Ollama's OLLAMA_NUM_PARALLEL (its release's default)");
  eng->add_option("--ubatch-size", o.n_ubatch, "llama.cpp -ub")->capture_default_str();
  eng->add_option("--batch-size", o.n_batch, "llama.cpp -b")->capture_default_str();
  eng->add_option("--cache-type-k", o.cache_type_k,
                  "llama.cpp -ctk: f16 bf16 f32 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl (Ollama's "
                  "OLLAMA_KV_CACHE_TYPE: f16 q8_0 q4_0)");
  eng->add_option("--cache-type-v", o.cache_type_v, "llama.cpp -ctv (quantized needs -fa on)");
  eng->add_flag("--no-mmap", o.no_mmap, "llama.cpp: read the model into RAM instead of mapping");
  eng->add_flag("--swa-full", o.swa_full, "llama.cpp: full-size cache for sliding-window layers");
  eng->add_flag("--no-op-offload", o.no_op_offload,
                "llama.cpp --no-op-offload (b5346+): the products of weights in host memory stay "
                "on the CPU (by default a CUDA build copies each weight into the first GPU's "
                "compute buffer for prompt batches of 32+ tokens)");
  eng->add_option("--device,--dev", o.device,
                  "llama.cpp -dev: the GPUs to offload to, CUDA0,CUDA1 (layers split over them) or "
                  "none (everything on the host)");
  eng->add_option("--fit", o.fit,
                  "llama.cpp --fit on|off: what llama-server (b7407+, on by default there) "
                  "chooses for the -c, -ngl, -ts (over the GPUs of -dev) and MoE experts not "
                  "given, to leave --fit-target free on each GPU (default here: off, the flags as "
                  "given)");
  eng->add_option("--fit-target", o.fit_target_mib,
                  "llama.cpp: MiB --fit leaves free on each GPU (1024)");
  eng->add_option("--fit-ctx", o.fit_ctx, "llama.cpp: the smallest context --fit may choose (4096)")
      ->check(CLI::Range(1U, UINT32_MAX));
  eng->add_flag("--no-kv-unified,!--kv-unified", o.no_kv_unified,
                "llama.cpp: one KV stream per slot (--kv-unified, -kvu: one shared by all)");
  eng->add_option("--gpu-overhead", o.gpu_overhead,
                  "Ollama's OLLAMA_GPU_OVERHEAD (v0.3.10 - v0.2x): VRAM it keeps free on each GPU "
                  "when it places the layers, in bytes as Ollama reads it, or 2GiB")
      ->envname("OLLAMA_GPU_OVERHEAD");
  eng->add_option("--host-mem", o.host_mem,
                  "Host RAM for CPU engines (llama.cpp), e.g. 32GiB (default: this machine's)");
  add_architecture_options(cmd, o.architecture);
  auto* spec = cmd->add_option_group("speculative decoding");
  spec->add_option("--speculative-model,--draft-model", o.speculative_model,
                   "Draft model (catalog id or path)");
  spec->add_option("--num-speculative-tokens,--max-draft-len", o.num_speculative_tokens,
                   "Draft length");
  spec->add_flag("--spec-runtime-control", o.spec_runtime_control,
                 "Draft length switched at runtime: CUDA graphs for draft length 0 and k");
  auto* work = cmd->add_option_group("workload");
  work->add_option("--context", o.contexts,
                   "Tokens per request, e.g. 8K,32K (default: max-model-len)")
      ->delimiter(',');
  work->add_option("--concurrency", o.concurrency, "Requests in flight, e.g. 1,8,64")
      ->delimiter(',');
}

std::vector<std::string> attach_flag_strings(std::vector<std::string> args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t n_values = a == "--estimate-with" ? 1 : a == "--compare" ? 2 : 0;
    if (n_values == 0 || i + n_values >= args.size()) {
      out.push_back(a);
      continue;
    }
    for (size_t k = 1; k <= n_values; ++k)  // "" would be dropped: a blank says "no flags"
      out.push_back(a + "=" + (args[i + k].empty() ? std::string(" ") : args[i + k]));
    i += n_values;
  }
  return out;
}

std::vector<std::string> normalize_short_flags(std::vector<std::string> args) {
  static const std::pair<std::string_view, std::string_view> k_aliases[] = {
      {"-tp", "--tensor-parallel-size"},
      {"-pp", "--pipeline-parallel-size"},
      {"-dp", "--data-parallel-size"},
      {"-ngl", "--n-gpu-layers"},
      {"-ts", "--tensor-split"},
      {"-np", "--parallel"},
      {"-fa", "--flash-attn"},
      {"-ub", "--ubatch-size"},
      {"-b", "--batch-size"},
      {"-c", "--ctx-size"},
      {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"},
      {"-kvu", "--kv-unified"},
      {"-ot", "--override-tensor"},
      {"-cmoe", "--cpu-moe"},
      {"-ncmoe", "--n-cpu-moe"},
      {"-dev", "--device"},
      {"-fit", "--fit"},
      {"-fitt", "--fit-target"},
      {"-fitc", "--fit-ctx"},
  };
  for (auto& a : args) {
    for (const auto& [from, to] : k_aliases) {
      if (a == from) a = to;
    }
  }
  // A bare -fa (llama.cpp before on|off|auto) means on.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--flash-attn") continue;
    const bool has_value = i + 1 < args.size() && !args[i + 1].starts_with("-");
    if (!has_value) args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, "on");
  }
  return args;
}

namespace {

std::vector<std::string> flag_words(std::string_view flags) {
  std::vector<std::string> args;
  for (auto& word : split(flags, ' ')) {
    if (!trim(word).empty()) args.push_back(trim(word));
  }
  return normalize_short_flags(std::move(args));
}

}  // namespace

std::set<std::string> estimate_flags_given(std::string_view flags) {
  if (flags.size() > 4096) return {};
  EstimateOptions o;
  CLI::App app{"estimate flags", "--estimate-with"};
  add_estimate_options(&app, o);
  const auto args = flag_words(flags);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return {};
  }
  return flags_given(app);
}

std::set<std::string> flags_given(const CLI::App& cmd) {
  std::set<std::string> given;
  const auto collect = [&given](const CLI::App* a) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->count() > 0 && !opt->get_lnames().empty()) given.insert(opt->get_lnames().front());
    }
  };
  collect(&cmd);
  for (const CLI::App* group : cmd.get_subcommands([](const CLI::App* a) {
         return a->get_name().empty();  // option groups
       })) {
    collect(group);
  }
  return given;
}

Expected<estimate::EstimateInput> parse_estimate_flags(std::string_view flags,
                                                       EstimateOptions defaults) {
  if (flags.size() > 4096) return fail(ErrorKind::usage, "--estimate-with: over 4096 characters");
  std::vector<std::string> args = flag_words(flags);
  CLI::App app{"estimate flags", "--estimate-with"};
  add_estimate_options(&app, defaults);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ExtrasError& e) {
    const std::string text = unexpected_arguments_text(app);
    return fail(ErrorKind::usage,
                fmt::format("--estimate-with: {}", text.empty() ? e.what() : text));
  } catch (const CLI::ParseError& e) {
    return fail(ErrorKind::usage, fmt::format("--estimate-with: {}", e.what()));
  }
  try {
    return build_estimate_input(defaults);
  } catch (const Fatal& e) {
    return std::unexpected(e.error().with_context("--estimate-with"));
  }
}

}  // namespace kvprof::cli
