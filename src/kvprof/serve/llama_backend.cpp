// LlamaBackend: loading, the engine thread (inbox -> ContinuousBatcher::step -> sinks), and
// llama-server's GET endpoints over a snapshot published after every step.
#include "kvprof/serve/llama_backend.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "kvprof/llama/chat.hpp"
#include "kvprof/llama/memory.hpp"
#include "kvprof/serve/batcher.hpp"
#include "kvprof/serve/llama_api.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::serve {

using nlohmann::ordered_json;

class LlamaBackend::Impl {
 public:
  LlamaBackendOptions options;
  std::shared_ptr<llama::LlamaLib> lib;
  std::unique_ptr<llama::LlamaModel> model;
  std::unique_ptr<llama::LlamaContext> ctx;
  std::unique_ptr<ContinuousBatcher> batcher;
  std::vector<llama::BufferMemory> memory;
  std::string model_id;
  int64_t created_unix_s = 0;
  std::string chat_template;          // applied to chat requests; empty: a plain join
  std::string chat_template_warning;  // why there is none

  struct Submitted {
    uint64_t task_id;
    GenerateRequest request;
    EventSink sink;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Submitted> inbox;
  std::vector<uint64_t> cancels;
  bool stopping = false;
  uint64_t next_task_id = 0;
  std::thread thread;

  // Published after each step for the GET endpoints (any thread).
  mutable std::mutex snap_mu;
  std::vector<SlotView> slots;
  BatcherStats stats;

  void publish() {
    std::lock_guard lock(snap_mu);
    slots = batcher->slots();
    stats = batcher->stats();
  }

  [[nodiscard]] std::string text_of(const std::vector<int32_t>& tokens) const {
    std::string text;
    for (int32_t t : tokens)
      text += model->token_piece(t);
    return text;
  }

  void loop() {
    std::unordered_map<uint64_t, EventSink> sinks;
    std::unordered_map<uint64_t, std::string> pending_text;  // bytes of a cut UTF-8 character
    for (;;) {
      std::vector<Submitted> submitted;
      std::vector<uint64_t> cancelled;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] {
          return stopping || !inbox.empty() || !cancels.empty() || batcher->has_work();
        });
        if (stopping) break;
        submitted.swap(inbox);
        cancelled.swap(cancels);
      }
      for (auto& s : submitted) {
        batcher->add(s.task_id, std::move(s.request.prompt_tokens), s.request.max_tokens,
                     s.request.ignore_eos);
        sinks[s.task_id] = std::move(s.sink);
      }
      for (uint64_t id : cancelled) {
        batcher->cancel(id);
        sinks.erase(id);
        pending_text.erase(id);
      }
      auto events = batcher->step();
      std::vector<TaskEvent> done;
      if (events) {
        done = std::move(*events);
      } else {
        std::fprintf(stderr, "kvprof serve: %s\n", events.error().message.c_str());
        // The batcher finished every running request; tell their clients.
        for (auto& [id, sink] : sinks) {
          GenerateEvent ev;
          ev.finished = true;
          ev.finish_reason = "error";
          sink(std::move(ev));
        }
        sinks.clear();
        pending_text.clear();
      }
      publish();
      for (auto& ev : done) {
        const auto it = sinks.find(ev.task_id);
        if (it == sinks.end()) continue;
        GenerateEvent out;
        std::string& pending = pending_text[ev.task_id];
        pending += text_of(ev.tokens);
        out.text = take_utf8(pending, ev.finished);
        out.tokens = std::move(ev.tokens);
        out.finished = ev.finished;
        out.finish_reason = ev.finish_reason;
        out.prompt_tokens = ev.n_prompt_tokens;
        out.completion_tokens = ev.n_decoded;
        out.prompt_ms = ev.prompt_ms;
        out.predicted_ms = ev.predicted_ms;
        it->second(std::move(out));
        if (ev.finished) {
          sinks.erase(it);
          pending_text.erase(ev.task_id);
        }
      }
    }
  }

  [[nodiscard]] ordered_json memory_json() const {
    auto buffers = ordered_json::array();
    uint64_t model_bytes = 0, context_bytes = 0, compute_bytes = 0;
    for (const auto& b : memory) {
      buffers.push_back({{"buffer_type", b.buffer_type},
                         {"model_bytes", b.model_bytes},
                         {"context_bytes", b.context_bytes},
                         {"compute_bytes", b.compute_bytes}});
      model_bytes += b.model_bytes;
      context_bytes += b.context_bytes;
      compute_bytes += b.compute_bytes;
    }
    return {{"buffers", buffers},
            {"model_bytes", model_bytes},
            {"context_bytes", context_bytes},
            {"compute_bytes", compute_bytes}};
  }

  [[nodiscard]] ordered_json props_json() const {
    const auto& facts = model->facts();
    const auto& info = lib->info();
    return {
        {"default_generation_settings",
         {{"id", 0},
          {"id_task", -1},
          {"n_ctx", batcher->settings().n_ctx_slot},
          {"speculative", false},
          {"is_processing", false},
          {"params", {{"temperature", 0.0}, {"top_k", 1}, {"n_predict", -1}}}}},
        {"total_slots", batcher->settings().n_slots},
        {"model_alias", model_id},
        {"model_path", options.engine.model_path},
        {"modalities", {{"vision", false}, {"audio", false}}},
        {"chat_template", chat_template},
        {"build_info", fmt::format("kvprof {} (libllama {})", KVPROF_VERSION, info.llama_version)},
        {"kvprof",
         {{"n_ctx", ctx->n_ctx()},
          {"n_batch", ctx->n_batch()},
          {"n_ubatch", ctx->n_ubatch()},
          {"n_seq_max", ctx->n_seq_max()},
          {"model",
           {{"description", facts.description},
            {"size_bytes", facts.size_bytes},
            {"n_params", facts.n_params},
            {"n_layer", facts.n_layer},
            {"n_embd", facts.n_embd},
            {"n_vocab", facts.n_vocab},
            {"n_ctx_train", facts.n_ctx_train}}},
          {"library",
           {{"path", info.library.string()},
            {"llama_version", info.llama_version},
            {"package", info.package},
            {"cpu_backend", info.cpu_backend}}},
          {"memory", memory_json()}}}};
  }
};

namespace {

// Sets the chat template: --chat-template (usage error, with the closest built-in names, when
// llama.cpp does not know it), else the model's; without a usable one, why not.
Expected<void> choose_chat_template(LlamaBackend::Impl& impl) {
  const std::vector<llama::ChatMessage> probe = {{"user", "w0"}};
  const std::string& given = impl.options.chat_template;
  if (!given.empty()) {
    if (auto ok = llama::apply_chat_template(*impl.lib, given, probe); !ok) {
      const auto names = llama::builtin_chat_templates(*impl.lib);
      const auto close = closest_matches(given, names);
      std::string hint;
      for (const auto& n : close)
        hint += (hint.empty() ? "" : ", ") + n;
      return fail(ErrorKind::usage,
                  fmt::format("--chat-template: {}{}", ok.error().message,
                              hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
    }
    impl.chat_template = given;
    return {};
  }
  const auto from_model = llama::model_chat_template(*impl.model);
  if (!from_model) {
    impl.chat_template_warning =
        "the model has no chat template (tokenizer.chat_template): chat messages are joined "
        "with newlines; give --chat-template NAME";
  } else if (!llama::apply_chat_template(*impl.lib, *from_model, probe)) {
    impl.chat_template_warning =
        "llama.cpp does not know the model's chat template: chat messages are joined with "
        "newlines; give --chat-template NAME";
  } else {
    impl.chat_template = *from_model;
  }
  return {};
}

}  // namespace

LlamaBackend::LlamaBackend(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

LlamaBackend::~LlamaBackend() {
  stop();
}

Expected<std::unique_ptr<LlamaBackend>> LlamaBackend::start(const LlamaBackendOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  auto lib = llama::LlamaLib::load(options.library);
  if (!lib) return std::unexpected(lib.error());
  impl->lib = std::move(*lib);
  auto model = llama::LlamaModel::load(impl->lib, options.engine);
  if (!model) return std::unexpected(model.error());
  impl->model = std::move(*model);
  // One output per slot, as llama-server reserves its graph (a step decodes at most one token
  // with logits per slot).
  llama::LlamaSettings engine = options.engine;
  engine.n_outputs_max = std::max(1U, engine.n_seq_max);
  auto ctx = llama::LlamaContext::create(*impl->model, engine);
  if (!ctx) return std::unexpected(ctx.error());
  impl->ctx = std::move(*ctx);
  BatcherSettings bs;
  bs.n_slots = impl->ctx->n_seq_max();
  // Each slot's context as llama.cpp gives it (n_ctx_seq): all the cells with one shared cache
  // (-kvu), its share of them otherwise.
  bs.n_ctx_slot = options.engine.kv_unified ? impl->ctx->n_ctx()
                                            : impl->ctx->n_ctx() / std::max(1U, bs.n_slots);
  bs.n_batch = impl->ctx->n_batch();
  impl->batcher = std::make_unique<ContinuousBatcher>(*impl->model, *impl->ctx, bs);
  impl->memory = llama::memory_breakdown(*impl->lib, *impl->ctx);
  if (auto chat = choose_chat_template(*impl); !chat) return std::unexpected(chat.error());
  impl->model_id = !options.alias.empty()
                       ? options.alias
                       : std::filesystem::path(options.engine.model_path).filename().string();
  impl->created_unix_s = static_cast<int64_t>(std::time(nullptr));
  impl->publish();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<LlamaBackend>(new LlamaBackend(std::move(impl)));
}

void LlamaBackend::stop() {
  if (!m_impl) return;
  {
    std::lock_guard lock(m_impl->mu);
    m_impl->stopping = true;
  }
  m_impl->cv.notify_all();
  if (m_impl->thread.joinable()) m_impl->thread.join();
}

std::string LlamaBackend::model_id() const {
  return m_impl->model_id;
}

llama::LlamaLib& LlamaBackend::lib() const {
  return *m_impl->lib;
}

Expected<std::vector<int32_t>> LlamaBackend::tokenize(std::string_view text,
                                                      bool add_special) const {
  return m_impl->model->tokenize(text, add_special);
}

Expected<std::string> LlamaBackend::chat_prompt(std::span<const ChatMessage> messages) const {
  if (m_impl->chat_template.empty()) return plain_chat_join(messages);
  std::vector<llama::ChatMessage> chat;
  chat.reserve(messages.size());
  for (const auto& m : messages)
    chat.push_back({m.role, m.content});
  auto text = llama::apply_chat_template(*m_impl->lib, m_impl->chat_template, chat);
  if (!text) return fail(ErrorKind::input, text.error().message);
  return text;
}

const std::string& LlamaBackend::chat_template_warning() const {
  return m_impl->chat_template_warning;
}

std::string LlamaBackend::detokenize(const std::vector<int32_t>& tokens) const {
  std::string text = m_impl->text_of(tokens);
  return take_utf8(text, true);
}

std::optional<HttpReply> LlamaBackend::admit(GenerateRequest& request) const {
  const ContinuousBatcher& b = *m_impl->batcher;
  const uint32_t n_ctx = b.settings().n_ctx_slot;
  const auto n_prompt = request.prompt_tokens.size();
  const int32_t n_vocab = m_impl->model->facts().n_vocab;
  for (int32_t t : request.prompt_tokens) {
    if (t < 0 || t >= n_vocab) {
      return HttpReply{
          400, ContentType::json,
          llama_error_json(400, fmt::format("invalid token id {} (vocabulary of {})", t, n_vocab))
              .dump()};
    }
  }
  if (request.max_tokens == 0 && n_prompt < n_ctx) {
    request.max_tokens = n_ctx - static_cast<uint32_t>(n_prompt);
  }
  if (auto ok = b.check_request(n_prompt, request.max_tokens); !ok) {
    const auto body =
        n_prompt == 0
            ? llama_error_json(400, ok.error().message)
            : llama_exceed_context_json(ok.error().message, static_cast<uint32_t>(n_prompt), n_ctx);
    return HttpReply{400, ContentType::json, body.dump()};
  }
  return std::nullopt;
}

uint64_t LlamaBackend::submit(GenerateRequest request, EventSink sink) {
  uint64_t id = 0;
  {
    std::lock_guard lock(m_impl->mu);
    id = m_impl->next_task_id++;
    m_impl->inbox.push_back({id, std::move(request), std::move(sink)});
  }
  m_impl->cv.notify_one();
  return id;
}

void LlamaBackend::cancel(uint64_t task_id) {
  {
    std::lock_guard lock(m_impl->mu);
    m_impl->cancels.push_back(task_id);
  }
  m_impl->cv.notify_one();
}

std::string LlamaBackend::error_body(int status, std::string_view message) const {
  return llama_error_json(status, message).dump();
}

std::optional<HttpReply> LlamaBackend::get(std::string_view path) const {
  const Impl& d = *m_impl;
  if (path == "/health" || path == "/v1/health")
    return HttpReply{200, ContentType::json, R"({"status":"ok"})"};
  if (path == "/v1/models" || path == "/models") {
    const auto& facts = d.model->facts();
    ordered_json card{{"id", d.model_id},
                      {"object", "model"},
                      {"created", d.created_unix_s},
                      {"owned_by", "llamacpp"},
                      {"meta",
                       {{"n_vocab", facts.n_vocab},
                        {"n_ctx_train", facts.n_ctx_train},
                        {"n_embd", facts.n_embd},
                        {"n_params", facts.n_params},
                        {"size", facts.size_bytes}}}};
    ordered_json list{{"object", "list"}, {"data", ordered_json::array({card})}};
    return HttpReply{200, ContentType::json, list.dump()};
  }
  if (path == "/props") return HttpReply{200, ContentType::json, d.props_json().dump()};
  if (path == "/slots") {
    if (!d.options.slots) {
      return HttpReply{
          501, ContentType::json,
          llama_error_json(501, "This server does not support slots endpoint.").dump()};
    }
    std::lock_guard lock(d.snap_mu);
    return HttpReply{200, ContentType::json,
                     slots_json(d.slots, api_shape(d.options.api_build)).dump()};
  }
  if (path == "/metrics") {
    if (!d.options.metrics) {
      return HttpReply{501, ContentType::json,
                       llama_error_json(501,
                                        "This server does not support metrics endpoint. Start "
                                        "it with `--metrics`")
                           .dump()};
    }
    std::lock_guard lock(d.snap_mu);
    return HttpReply{200, ContentType::prometheus_text,
                     llama_metrics_text(d.stats, api_shape(d.options.api_build), d.ctx->n_ctx())};
  }
  return std::nullopt;
}

std::string LlamaBackend::describe() const {
  const Impl& d = *m_impl;
  uint64_t kv_bytes = 0;
  uint64_t compute_bytes = 0;
  for (const auto& b : d.memory) {
    kv_bytes += b.context_bytes;
    compute_bytes += b.compute_bytes;
  }
  return fmt::format(
      "model={} ({}, {}) n_ctx={} slots={} n_ctx_slot={} n_batch={} KV {} compute {}", d.model_id,
      d.model->facts().description, format_bytes(d.model->facts().size_bytes), d.ctx->n_ctx(),
      d.batcher->settings().n_slots, d.batcher->settings().n_ctx_slot, d.ctx->n_batch(),
      format_bytes(kv_bytes), format_bytes(compute_bytes));
}

}  // namespace kvprof::serve
