// run_worker: the child process of `kvprof bench`.
#include "kvprof/bench/worker.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "kvprof/client/transport.hpp"
#include "kvprof/llama/memory.hpp"
#include "kvprof/model/gguf.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::bench {
namespace {

using nlohmann::json;

class Events {
 public:
  explicit Events(int fd) : m_fd(fd) {}
  // Writes one event line; a broken pipe (the parent died) ends the worker.
  void emit(json event) {
    event["t_mono_ns"] = monotonic_now_ns();
    std::string line = json_text(event);
    line.push_back('\n');
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(m_fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(1);
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

 private:
  int m_fd;
};

// This process's host memory now.
json self_memory() {
  sys::ProcSource proc;
  json out = json::object();
  if (auto m = proc.sample(getpid())) {
    if (m->rss_bytes) out["rss_bytes"] = *m->rss_bytes;
    if (m->pss_bytes) out["pss_bytes"] = *m->pss_bytes;
  }
  return out;
}

void phase(Events& ev, const char* name) {
  json e = {{"ev", "phase"}, {"name", name}};
  e.update(self_memory());
  ev.emit(std::move(e));
}

int failed(Events& ev, const Error& error) {
  ev.emit({{"ev", "error"},
           {"kind", error.kind == ErrorKind::interrupted ? "interrupted" : "engine"},
           {"usage", error.kind == ErrorKind::usage || error.kind == ErrorKind::input},
           {"message", error.message}});
  return error.kind == ErrorKind::interrupted ? 130 : 1;
}

json llama_breakdown_json(const llama::LlamaLib& lib, const llama::LlamaContext& ctx) {
  json out = json::array();
  for (const auto& b : llama::memory_breakdown(lib, ctx)) {
    out.push_back({{"buffer_type", b.buffer_type},
                   {"model_bytes", b.model_bytes},
                   {"context_bytes", b.context_bytes},
                   {"compute_bytes", b.compute_bytes}});
  }
  return out;
}

}  // namespace

int run_worker(const BenchConfig& config, int event_fd, const std::filesystem::path& engine_log) {
  Events ev(event_fd);
  sys::install_stop_handlers();
  const int log_fd = ::open(engine_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  phase(ev, "before_load");
  auto lib = llama::LlamaLib::load(config.library);
  if (!lib) return failed(ev, lib.error());
  (*lib)->set_log_sink([log_fd](const llama::LlamaLogLine& line) {
    if (log_fd < 0) return;
    std::string text = line.text;
    text.push_back('\n');
    (void)!::write(log_fd, text.data(), text.size());
  });
  // What was logged while the library loaded (backend choice) goes first.
  for (const auto& line : (*lib)->kept_log(/*debug=*/true)) {
    if (log_fd >= 0) (void)!::write(log_fd, (line + "\n").data(), line.size() + 1);
  }
  const auto& info = (*lib)->info();
  json devices = json::array();
  for (const auto& d : info.devices) {
    json dev = {{"name", d.name}, {"description", d.description}, {"type", d.type}};
    if (d.total_bytes) dev["total_bytes"] = *d.total_bytes;
    if (d.free_bytes) dev["free_bytes"] = *d.free_bytes;
    devices.push_back(std::move(dev));
  }
  ev.emit({{"ev", "lib"},
           {"library", info.library.string()},
           {"llama_version", info.llama_version},
           {"package", info.package},
           {"llama_cpp_release", info.llama_cpp_release},
           {"cpu_backend", info.cpu_backend},
           {"system_info", info.system_info},
           {"devices", devices}});
  phase(ev, "after_lib");

  auto model = llama::LlamaModel::load(*lib, config.engine);
  if (!model) return failed(ev, model.error());
  const auto& facts = (*model)->facts();
  // The model's own name (general.name): llama.cpp's description is only its size class.
  std::string name;
  if (auto gguf = model::read_gguf(config.engine.model_path)) {
    if (const auto* n = gguf->find("general.name"); n != nullptr && n->as_string()) {
      name = to_valid_utf8(*n->as_string(), /*printable=*/true);
    }
  }
  ev.emit({{"ev", "model"},
           {"name", name},
           {"description", facts.description},
           {"size_bytes", facts.size_bytes},
           {"n_params", facts.n_params},
           {"n_layer", facts.n_layer},
           {"n_embd", facts.n_embd},
           {"n_vocab", facts.n_vocab},
           {"n_ctx_train", facts.n_ctx_train}});
  phase(ev, "after_load");

  const auto stop = [] { return sys::stop_requested(); };
  // One context for every condition, or one per condition (created when it starts).
  std::unique_ptr<llama::LlamaContext> ctx;
  auto make_context = [&](const llama::LlamaSettings& s) -> Expected<void> {
    ctx.reset();
    auto made = llama::LlamaContext::create(**model, s);
    if (!made) return std::unexpected(made.error());
    ctx = std::move(*made);
    ev.emit({{"ev", "context"},
             {"n_ctx", ctx->n_ctx()},
             {"n_batch", ctx->n_batch()},
             {"n_ubatch", ctx->n_ubatch()},
             {"n_seq_max", ctx->n_seq_max()},
             {"breakdown", llama_breakdown_json(**lib, *ctx)}});
    return {};
  };
  const auto conditions = make_conditions(config);
  if (conditions.empty()) return 0;
  if (auto ok = make_context(settings_for(config, conditions.front())); !ok) {
    return failed(ev, ok.error());
  }
  phase(ev, "after_context");
  // Warm up: one short sequence touches the weights and the compute buffer once.
  {
    const std::vector<std::vector<int32_t>> warm = {std::vector<int32_t>(8, 1)};
    if (auto w = ctx->prefill(warm, stop); !w) return failed(ev, w.error());
    ctx->clear();
  }
  phase(ev, "after_warmup");

  std::mt19937_64 rng(config.seed);
  const int32_t n_vocab = std::max(facts.n_vocab, 16);
  // Ordinary tokens only: the first ids of a vocabulary are usually control tokens.
  std::uniform_int_distribution<int32_t> token(std::min(n_vocab - 1, 259), n_vocab - 1);
  for (const auto& cond : conditions) {
    if (sys::stop_requested()) return failed(ev, Error{ErrorKind::interrupted, "interrupted"});
    if (config.context_per_condition() && cond.index > 0) {
      if (auto ok = make_context(settings_for(config, cond)); !ok) return failed(ev, ok.error());
    }
    auto& c = *ctx;
    c.clear();
    c.reset_perf();
    json start_event = {
        {"ev", "condition_start"},    {"index", cond.index},
        {"label", cond.label},        {"n_ctx", c.n_ctx()},
        {"n_seq_max", c.n_seq_max()}, {"breakdown", llama_breakdown_json(**lib, c)}};
    start_event.update(self_memory());
    ev.emit(std::move(start_event));
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t len : cond.prompt_tokens) {
      std::vector<int32_t> p(len);
      for (auto& t : p)
        t = token(rng);
      prompts.push_back(std::move(p));
    }
    const int64_t start = monotonic_now_ns();
    auto first = c.prefill(prompts, stop);
    if (!first) return failed(ev, first.error());
    const size_t n = prompts.size();
    std::vector<int32_t> ids(n), next = first->next_tokens, pos(n);
    for (size_t i = 0; i < n; ++i) {
      ids[i] = static_cast<int32_t>(i);
      pos[i] = static_cast<int32_t>(prompts[i].size());
    }
    std::vector<int64_t> step_ns;
    bool interrupted = false;
    for (uint32_t g = 1; g < cond.gen_tokens; ++g) {
      if (sys::stop_requested()) {
        interrupted = true;
        break;
      }
      const int64_t t0 = monotonic_now_ns();
      auto out = c.step(ids, next, pos);
      if (!out) return failed(ev, out.error());
      step_ns.push_back(monotonic_now_ns() - t0);
      next = std::move(*out);
      for (auto& p : pos)
        ++p;
    }
    const int64_t end = monotonic_now_ns();
    for (size_t i = 0; i < n; ++i) {
      ev.emit({{"ev", "request"},
               {"condition", cond.index},
               {"seq", i},
               {"prompt_tokens", prompts[i].size()},
               {"output_tokens", 1 + step_ns.size()},
               {"ttft_ms", static_cast<double>(first->done_mono_ns[i] - start) / 1e6},
               {"e2e_ms", static_cast<double>(end - start) / 1e6}});
    }
    const auto perf = c.perf();
    json e = {{"ev", "condition_end"},
              {"index", cond.index},
              {"wall_ms", static_cast<double>(end - start) / 1e6},
              {"step_ms", json::array()},
              {"interrupted", interrupted},
              {"llama_prompt_ms", perf.prompt_ms},
              {"llama_eval_ms", perf.eval_ms},
              {"llama_prompt_tokens", perf.prompt_tokens},
              {"llama_eval_tokens", perf.eval_tokens}};
    for (int64_t s : step_ns)
      e["step_ms"].push_back(static_cast<double>(s) / 1e6);
    e.update(self_memory());
    ev.emit(std::move(e));
    if (interrupted) return failed(ev, Error{ErrorKind::interrupted, "interrupted"});
  }
  ev.emit({{"ev", "memory_breakdown"}, {"breakdown", llama_breakdown_json(**lib, *ctx)}});
  ctx.reset();
  model->reset();
  phase(ev, "after_free");
  ev.emit({{"ev", "done"}});
  return 0;
}

}  // namespace kvprof::bench
