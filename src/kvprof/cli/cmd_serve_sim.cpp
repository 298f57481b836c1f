// `kvprof serve-sim`: runs the SIMULATED OpenAI-compatible vLLM server on a loopback port until
// SIGINT/SIGTERM or --duration, printing one line with the URL for a parent process to read.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include <unistd.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/sim/live_state.hpp"
#include "kvprof/sim/sim_server.hpp"
#include "kvprof/sim/startup_log.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {

namespace {

struct ServeSimOptions {
  sim::SimFlags flags;
  uint32_t num_gpu_blocks = 0;
  uint32_t max_model_len = 0;
  uint32_t max_num_batched_tokens = 0;
  double tokens_per_s = 0;
  std::string weights;
  std::string kv_bytes_per_block;
  std::string activation_bytes_per_token;
  double duration_s = 0;
  std::string startup_log;
  bool vllm_startup_log = false;
  uint32_t startup_line_delay_ms = 50;
  std::string cuda_graph_bytes_per_graph;
};

// Prints `lines` (a real engine's startup log, or the vLLM-shaped one made from the simulated
// sizes) to stdout, one every `delay_ms`, before the server listens, so a launched serve-sim has a
// startup to watch. With a live-state file the simulated memory grows as the lines report it:
// non-torch at first, the weights with a weights line, the KV pool with a KV line, the CUDA
// graphs with a graph line (each published just before its line is printed).
void play_startup_log(const std::vector<std::string>& lines, uint32_t delay_ms,
                      const sim::SimConfig& config) {
  sim::LiveMemory live{config.total_bytes, config.reserved_bytes, config.non_torch_bytes,
                       static_cast<uint32_t>(::getpid())};
  const auto publish = [&] {
    if (!config.live_state_path.empty()) (void)sim::write_live_state(config.live_state_path, live);
  };
  publish();
  enginelog::EngineLogParser parser(engines::log_parse_options());
  for (const auto& line : lines) {
    if (line.empty()) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (sys::stop_requested()) return;
    // As a real engine: the memory a line reports is allocated before the line is printed.
    const size_t seen = parser.report().figures.size();
    parser.feed(line + "\n");
    const auto& figures = parser.report().figures;
    for (size_t i = seen; i < figures.size(); ++i) {
      const auto& f = figures[i];
      if (f.component == enginelog::Component::weights) live.used_bytes += config.weights_bytes;
      if (f.component == enginelog::Component::kv_cache &&
          config.kv_pool_mode == sim::KvPoolMode::preallocated) {
        live.used_bytes += uint64_t{config.num_gpu_blocks} * config.kv_bytes_per_block;
      }
      if (f.component == enginelog::Component::cuda_graph)
        live.used_bytes += config.cuda_graph_bytes;
    }
    publish();
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
}

std::optional<uint64_t> bytes_flag(const std::string& text, const char* name) {
  if (text.empty()) return std::nullopt;
  auto bytes = parse_bytes(text);
  if (!bytes)
    throw Fatal(Error{ErrorKind::usage, fmt::format("{}: {}", name, bytes.error().message)});
  return *bytes;
}

void run_serve_sim(ServeSimOptions& o) {
  sim::SimFlags& f = o.flags;
  if (o.num_gpu_blocks > 0) f.num_gpu_blocks = o.num_gpu_blocks;
  if (o.max_model_len > 0) f.max_model_len = o.max_model_len;
  if (o.max_num_batched_tokens > 0) f.max_num_batched_tokens = o.max_num_batched_tokens;
  if (o.tokens_per_s > 0) f.tokens_per_s = o.tokens_per_s;
  f.weights_bytes = bytes_flag(o.weights, "--weights");
  f.kv_bytes_per_block = bytes_flag(o.kv_bytes_per_block, "--kv-bytes-per-block");
  f.activation_bytes_per_token =
      bytes_flag(o.activation_bytes_per_token, "--activation-bytes-per-token");
  f.cuda_graph_bytes_per_graph =
      bytes_flag(o.cuda_graph_bytes_per_graph, "--cuda-graph-bytes-per-graph");
  if (o.duration_s < 0) throw Fatal(Error{ErrorKind::usage, "--duration must be >= 0"});

  sim::SimConfig config = value_or_fatal(sim::sim_config_from_flags(f));
  config.quiet = true;  // the line below is the startup log
  if (!o.startup_log.empty() && o.vllm_startup_log) {
    throw Fatal(Error{ErrorKind::usage, "--startup-log and --vllm-startup-log exclude each other"});
  }
  if (!o.startup_log.empty() || o.vllm_startup_log) {
    sys::install_stop_handlers();
    std::vector<std::string> lines;
    if (o.vllm_startup_log) {
      lines = sim::vllm_startup_lines(config, static_cast<uint32_t>(::getpid()));
    } else {
      lines = split(value_or_fatal(sys::read_text_file(o.startup_log, 16U << 20)), '\n');
    }
    play_startup_log(lines, o.startup_line_delay_ms, config);
  }
  auto server = value_or_fatal(sim::SimServer::start(config));

  std::printf(
      "serve-sim (SIMULATED %s engine) listening on %s model=%s blocks=%u block_size=%u "
      "sized by %s\n",
      f.engine.c_str(), server->base_url().c_str(), config.model.c_str(), config.num_gpu_blocks,
      config.block_size, config.sizing.c_str());
  std::fflush(stdout);
  std::fprintf(stderr,
               "kvprof serve-sim: no GPU and no model are used; max_num_seqs=%u "
               "max_model_len=%u step=%.2f ms + per-token costs; simulated used memory %s%s\n",
               config.max_num_seqs, config.max_model_len, config.step_base_ms,
               format_bytes(sim::sim_used_bytes(config, 0, 0)).c_str(),
               config.live_state_path.empty() ? "" : (" -> " + config.live_state_path).c_str());

  sys::install_stop_handlers();
  const auto start = std::chrono::steady_clock::now();
  while (!sys::wait_for_stop(std::chrono::milliseconds(50))) {
    if (o.duration_s > 0 &&
        std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(o.duration_s)) {
      break;
    }
  }
  server->stop();
  const auto stats = server->stats();
  std::fprintf(stderr,
               "kvprof serve-sim: stopped after %llu completion requests, %llu generated tokens, "
               "%llu preemptions, %llu faults injected\n",
               static_cast<unsigned long long>(stats.completion_requests_total),
               static_cast<unsigned long long>(stats.engine.generation_tokens_total),
               static_cast<unsigned long long>(stats.engine.num_preemptions_total),
               static_cast<unsigned long long>(stats.faults_injected_total));
}

}  // namespace

void register_serve_sim_command(CLI::App& app) {
  auto o = std::make_shared<ServeSimOptions>();
  auto* cmd = app.add_subcommand(
      "serve-sim",
      "Run a SIMULATED OpenAI-compatible vLLM server on loopback (no GPU, no model): continuous "
      "batching over a paged KV cache with prefix caching and preemption, vLLM /metrics, "
      "optional fault injection and a live-state file for the fake NVML library");
  auto& f = o->flags;
  cmd->add_option("--model", f.model, "Served model name (the id clients send)")->required();
  cmd->add_option("--gpu", f.gpu, "GPU from the catalog whose memory the simulation reports")
      ->required();
  cmd->add_option("--engine", f.engine, "Engine to simulate (only vllm)")->capture_default_str();
  cmd->add_option("--host", f.host, "Loopback address to bind")->capture_default_str();
  cmd->add_option("--port", f.port, "Port; 0 picks a free one (printed on stdout)")
      ->capture_default_str();
  cmd->add_option("--num-gpu-blocks", o->num_gpu_blocks,
                  "KV cache blocks (default: the planner's vLLM figure for --model on --gpu, "
                  "else what fits in 90% of the GPU)");
  cmd->add_option("--block-size", f.block_size, "Tokens per KV block (default: vLLM's, 16)");
  cmd->add_option("--max-num-seqs", f.max_num_seqs,
                  "Most requests running at once (default: vLLM's for the GPU)");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens,
                  "Token budget per step (chunked prefill; default 8192)");
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Prompt + max_tokens limit (default min(8192, KV capacity))");
  cmd->add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                  "vLLM's gpu_memory_utilization the planner sizes the KV blocks with (default "
                  "0.9)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--tensor-parallel-size", f.tensor_parallel_size,
                  "The simulated GPU is one of a tensor-parallel group this large: it holds its "
                  "share of the plan (weights, KV cache)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--jitter-seed", f.jitter_seed,
                  "Size the engine with seeded non-torch, activation, CUDA graph and allocator "
                  "differences from the plan, within the spread of real vLLM startups (default: "
                  "the plan exactly)");
  cmd->add_option(
      "--tokens-per-s", o->tokens_per_s,
      "Decode speed of a lone sequence, tokens/s (sets the base step time; default 500)");
  cmd->add_option("--weights", o->weights, "Simulated weights size, e.g. 15GiB (default 15 GiB)");
  cmd->add_option("--kv-bytes-per-block", o->kv_bytes_per_block,
                  "Simulated bytes of one KV block (default 2 MiB)");
  cmd->add_option("--activation-bytes-per-token", o->activation_bytes_per_token,
                  "Simulated activation bytes per scheduled token (default 64 KiB)");
  cmd->add_flag("--enforce-eager", f.enforce_eager,
                "Capture no CUDA graphs (like vLLM's --enforce-eager): no graph memory");
  cmd->add_option("--cuda-graph-sizes", f.cuda_graph_sizes,
                  "CUDA graph capture sizes, e.g. 1,2,4,8 (default: vLLM's for --max-num-seqs); "
                  "one piecewise graph per size and one full decode graph per size up to "
                  "--max-num-seqs")
      ->delimiter(',');
  cmd->add_option("--cuda-graph-bytes-per-graph", o->cuda_graph_bytes_per_graph,
                  "Simulated memory of one CUDA graph, e.g. 8MiB (default: the sized graph pool "
                  "over vLLM's graph count)");
  cmd->add_option("--live-state", f.live_state_path,
                  "File rewritten with the simulated GPU memory (read by the fake NVML library)");
  cmd->add_flag("--kv-on-demand", f.kv_on_demand,
                "Count only KV blocks in use as used memory (vLLM preallocates all of them)");
  cmd->add_flag("--no-metrics", f.no_metrics, "Answer 404 for /metrics (a server without it)");
  cmd->add_option("--api-key", f.api_key,
                  "Answer 401 on /v1/* without \"Authorization: Bearer KEY\" (like vLLM's "
                  "--api-key)");
  cmd->add_option("--cors", f.cors_origin,
                  "Allow browsers from this origin ('*': any) with CORS headers and preflight "
                  "answers (off by default)");
  cmd->add_flag("--reject-token-prompts", f.reject_token_prompts,
                "Answer 400 to a token-ID prompt, as llama.cpp's server does (\"prompt\" must "
                "be a string)");
  cmd->add_option("--dcgm-hostname", f.dcgm_hostname,
                  "Also answer GET /dcgm/metrics as NVIDIA's DCGM exporter on a node of this "
                  "name would, with the simulated GPU's memory (for --gpu-source dcgm=/"
                  "prometheus= tests)");
  cmd->add_option("--fault-kind", f.fault_kind,
                  "Fault to inject: reset, 500, 503, 429, stall, malformed, slow_first_token, "
                  "with optional ;after=N ;seconds=S");
  cmd->add_option(
      "--fault-rate", f.fault_rate,
      "Fraction of completion requests that get the fault (default 1 with --fault-kind)");
  cmd->add_option("--fault-seed", f.fault_seed, "Seed of the deterministic fault draw")
      ->capture_default_str();
  cmd->add_option("--startup-log", o->startup_log,
                  "Print this engine startup log (e.g. real vLLM lines) line by line before "
                  "listening; with --live-state the simulated memory grows as the lines say")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--vllm-startup-log", o->vllm_startup_log,
                "Print vLLM-shaped startup lines made from the simulated sizes before listening "
                "(weights, profile run, KV cache, one progress bar per CUDA graph capture pass)");
  cmd->add_option("--startup-line-delay-ms", o->startup_line_delay_ms,
                  "Pause before each --startup-log line")
      ->capture_default_str();
  cmd->add_option("--duration", o->duration_s, "Stop after this many seconds (0 = until a signal)");
  cmd->callback([o] { run_serve_sim(*o); });
}

}  // namespace kvprof::cli
