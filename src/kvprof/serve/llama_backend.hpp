// LlamaBackend: the real engine behind `kvprof serve` — libllama in-process (dlopen), one model,
// one context of -c cells shared by -np slots, and one engine thread running ContinuousBatcher.
// Chat requests are formatted with the model's chat template (or --chat-template) by llama.cpp's
// llama_chat_apply_template. Serves llama-server's own endpoints: /health, /v1/models, /props (with
// kvprof's exact memory breakdown per buffer type), /slots and, with --metrics, /metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvprof/llama/engine.hpp"
#include "kvprof/llama/library.hpp"
#include "kvprof/serve/backend.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::serve {

struct LlamaBackendOptions {
  llama::LlamaSettings engine;     // -m -c -np -b -ub -fa -ctk -ctv -ngl -t
  llama::LlamaLibOptions library;  // --llama-lib
  std::string alias;               // --alias: the served model id (default: the file name)
  bool metrics = false;            // --metrics: serve /metrics (llama-server's default is off)
  bool slots = true;               // /slots (llama-server: on unless --no-slots)
  // --api-release: /slots and /metrics shaped as this llama-server build writes them (0: the
  // newest, with kvprof serve's n_past).
  uint32_t api_build = 0;
  std::string chat_template;  // --chat-template: a built-in name or a template; "" = the model's
};

class LlamaBackend final : public Backend {
 public:
  // Loads libllama, the model and the context, and starts the engine thread. Driver error when
  // libllama is missing or the context cannot be created, input error when llama.cpp refuses
  // the model file, usage error for bad settings.
  static Expected<std::unique_ptr<LlamaBackend>> start(const LlamaBackendOptions& options);

  ~LlamaBackend() override;
  LlamaBackend(const LlamaBackend&) = delete;
  LlamaBackend& operator=(const LlamaBackend&) = delete;

  [[nodiscard]] std::string model_id() const override;
  [[nodiscard]] Expected<std::vector<int32_t>> tokenize(std::string_view text,
                                                        bool add_special) const override;
  [[nodiscard]] Expected<std::string> chat_prompt(
      std::span<const ChatMessage> messages) const override;
  [[nodiscard]] std::string detokenize(const std::vector<int32_t>& tokens) const override;
  [[nodiscard]] std::optional<HttpReply> admit(GenerateRequest& request) const override;
  uint64_t submit(GenerateRequest request, EventSink sink) override;
  void cancel(uint64_t task_id) override;
  [[nodiscard]] std::optional<HttpReply> get(std::string_view path) const override;
  [[nodiscard]] std::string error_body(int status, std::string_view message) const override;
  void stop() override;

  // One line for the startup log: model, context, slots, memory.
  [[nodiscard]] std::string describe() const;
  // Why chat messages are joined with newlines (no template, or one llama.cpp does not know),
  // for a warning at startup; empty when a chat template is applied.
  [[nodiscard]] const std::string& chat_template_warning() const;
  // The loaded library (for its log sink).
  [[nodiscard]] llama::LlamaLib& lib() const;

  class Impl;

 private:
  explicit LlamaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace kvprof::serve
