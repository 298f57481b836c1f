// `kvprof serve -m X.gguf`: a REAL engine (libllama in-process) behind the OpenAI-compatible
// front end, with llama-server's flags and endpoints; runs until SIGINT/SIGTERM or --duration,
// printing one line with the URL for a parent process to read.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "kvprof/cli/commands.hpp"
#include "kvprof/engines/llamacpp/releases.hpp"
#include "kvprof/serve/llama_backend.hpp"
#include "kvprof/serve/server.hpp"
#include "kvprof/sys/signals.hpp"

namespace kvprof::cli {

namespace {

struct ServeOptions {
  serve::LlamaBackendOptions backend;
  serve::ServerOptions server;
  std::string flash_attn = "auto";
  bool no_mmap = false;
  bool no_slots = false;
  bool kv_unified = false;
  bool quiet = false;
  double duration_s = 0;
  std::string api_release;
};

void run_serve(ServeOptions& o) {
  auto& e = o.backend.engine;
  e.flash_attn =
      value_or_fatal(llama::parse_flash_attn(o.flash_attn.empty() ? "on" : o.flash_attn));
  e.use_mmap = !o.no_mmap;
  e.kv_unified = o.kv_unified;  // -kvu: every slot may use all -c cells, as llama-server
  o.backend.slots = !o.no_slots;
  if (!o.api_release.empty()) {
    const auto release = value_or_fatal(engines::parse_llamacpp_release(o.api_release));
    o.backend.api_build = release.build;
  }
  if (o.duration_s < 0) throw Fatal(Error{ErrorKind::usage, "--duration must be >= 0"});
  if (e.n_seq_max == 0 || e.n_ctx < e.n_seq_max) {
    throw Fatal(Error{ErrorKind::usage, "-c must be at least -np (one cell per slot)"});
  }
  // llama.cpp's log: startup lines to stderr unless --quiet (the library is loaded by start()).
  const bool quiet = o.quiet;
  auto backend_or = serve::LlamaBackend::start(o.backend);
  if (!backend_or) throw Fatal(backend_or.error());
  std::shared_ptr<serve::LlamaBackend> backend = std::move(*backend_or);
  if (!backend->chat_template_warning().empty()) {
    std::fprintf(stderr, "kvprof serve: warning: %s\n", backend->chat_template_warning().c_str());
  }
  // The startup log whole but for its debug lines, as llama-server prints it without --verbose.
  if (!quiet) {
    for (const auto& line : backend->lib().kept_log(/*debug=*/false))
      std::fprintf(stderr, "%s\n", line.c_str());
  }
  backend->lib().set_log_sink([quiet](const llama::LlamaLogLine& line) {
    if (quiet ? line.level >= llama::abi::log_warn : line.level != llama::abi::log_debug)
      std::fprintf(stderr, "%s\n", line.text.c_str());
  });
  auto server = value_or_fatal(serve::Server::start(backend, o.server));

  std::printf("serve (llama.cpp engine, in-process) listening on %s model=%s\n",
              server->base_url().c_str(), backend->model_id().c_str());
  std::fflush(stdout);
  if (!quiet) std::fprintf(stderr, "kvprof serve: %s\n", backend->describe().c_str());

  sys::install_stop_handlers();
  const auto start = std::chrono::steady_clock::now();
  while (!sys::wait_for_stop(std::chrono::milliseconds(50))) {
    if (o.duration_s > 0 &&
        std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(o.duration_s)) {
      break;
    }
  }
  server->stop();
  backend->stop();
  const auto stats = server->stats();
  if (!quiet) {
    std::fprintf(stderr,
                 "kvprof serve: stopped after %llu completion requests (%llu refused, %llu "
                 "abandoned by their client); model freed\n",
                 static_cast<unsigned long long>(stats.completion_requests_total),
                 static_cast<unsigned long long>(stats.rejected_total),
                 static_cast<unsigned long long>(stats.streams_aborted_total));
  }
}

}  // namespace

void register_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve a GGUF with llama.cpp in-process (libllama, loaded at run time) behind an "
      "OpenAI-compatible HTTP server: continuous batching over -np slots, SSE streaming, "
      "llama-server's /slots, /props, /tokenize and (with --metrics) /metrics");
  auto& e = o->backend.engine;
  e.n_ctx = 4096;
  e.n_seq_max = 1;
  cmd->add_option("-m,--model", e.model_path, "GGUF file (make one with `kvprof make-gguf`)")
      ->required()
      ->envname("KVPROF_MODEL");
  cmd->add_option("--host", o->server.host, "Address to bind")->capture_default_str();
  cmd->add_option("--port", o->server.port, "Port; 0 picks a free one (printed on stdout)")
      ->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key,
                  "Clients must send 'Authorization: Bearer KEY' to /v1/ (401 otherwise)")
      ->envname("LLAMA_API_KEY");
  cmd->add_option("--cors", o->server.cors_origin,
                  "Allow browsers from this origin ('*': any) with CORS headers and preflight "
                  "answers (off by default)");
  cmd->add_option("-c,--ctx-size", e.n_ctx, "KV cells of the context, shared by the slots")
      ->capture_default_str();
  cmd->add_option("--parallel", e.n_seq_max, "Slots (-np): requests decoded together")
      ->capture_default_str();
  cmd->add_flag("--kv-unified", o->kv_unified,
                "-kvu: one KV cache shared by the slots, each may use all -c cells (without it, "
                "each slot holds -c / -np, as llama-server given -np)");
  cmd->add_option("-b,--batch-size", e.n_batch, "Most tokens per llama_decode")
      ->capture_default_str();
  cmd->add_option("--ubatch-size", e.n_ubatch, "Physical batch size (-ub)")->capture_default_str();
  cmd->add_option("--flash-attn", o->flash_attn, "on | off | auto (-fa; bare -fa: on)")
      ->expected(0, 1)
      ->capture_default_str();
  cmd->add_option("--cache-type-k", e.cache_type_k, "K cache type (-ctk)")->capture_default_str();
  cmd->add_option("--cache-type-v", e.cache_type_v, "V cache type (-ctv)")->capture_default_str();
  cmd->add_option("--n-gpu-layers,--gpu-layers", e.n_gpu_layers,
                  "Layers on the GPU (-ngl; -1 = all; CPU builds ignore it)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", e.n_threads, "CPU threads (0 = every core)")
      ->capture_default_str();
  cmd->add_flag("--no-mmap", o->no_mmap, "Read the model into memory instead of mapping it");
  cmd->add_option("--llama-lib", o->backend.library.path,
                  "libllama.so or its folder (default: KVPROF_LLAMA_LIB, then .deps/llama/)");
  cmd->add_option("--alias", o->backend.alias, "Served model name (default: the file name)");
  cmd->add_option("--chat-template", o->backend.chat_template,
                  "Chat template for /v1/chat/completions: one of llama.cpp's built-in names "
                  "(chatml, llama3, gemma, ...) or a template's text (default: the model's "
                  "tokenizer.chat_template)");
  cmd->add_flag("--metrics", o->backend.metrics,
                "Serve /metrics (llamacpp: names); off by default, as in llama-server");
  cmd->add_flag("--no-slots", o->no_slots, "Answer 501 for /slots, as llama-server --no-slots");
  cmd->add_option("--api-release", o->api_release,
                  "Answer /slots and /metrics as llama-server of this build does (b3889: an "
                  "integer state and KV gauges; b5640: no KV gauges nor per-slot token counts; "
                  "b8121: next_token as an array; v0.4.0 on: n_prompt_tokens), to try a tool "
                  "against older servers (default: the newest, with kvprof's n_past)")
      ->type_name("BUILD");
  cmd->add_flag("-q,--quiet", o->quiet, "Only warnings and errors of llama.cpp's log on stderr");
  cmd->add_option("--duration", o->duration_s, "Stop after this many seconds (0 = until a signal)");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace kvprof::cli
