// Chat templates through libllama (see chat.hpp).
#include "kvprof/llama/chat.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvprof::llama {

namespace {

constexpr size_t k_max_chat_bytes = 16ULL << 20;  // the formatted conversation

}  // namespace

std::optional<std::string> model_chat_template(const LlamaModel& model) {
  const auto& f = model.lib().fn();
  if (f.model_chat_template == nullptr) return std::nullopt;
  const char* tmpl = f.model_chat_template(model.raw(), nullptr);
  if (tmpl == nullptr || *tmpl == '\0') return std::nullopt;
  return std::string(tmpl);
}

std::vector<std::string> builtin_chat_templates(const LlamaLib& lib) {
  const auto& f = lib.fn();
  if (f.chat_builtin_templates == nullptr) return {};
  const int32_t n = f.chat_builtin_templates(nullptr, 0);
  if (n <= 0 || n > 4096) return {};
  std::vector<const char*> names(static_cast<size_t>(n), nullptr);
  const int32_t got = f.chat_builtin_templates(names.data(), names.size());
  std::vector<std::string> out;
  for (int32_t i = 0; i < std::min(n, got); ++i) {
    if (names[static_cast<size_t>(i)] != nullptr) out.emplace_back(names[static_cast<size_t>(i)]);
  }
  return out;
}

Expected<std::string> apply_chat_template(const LlamaLib& lib, const std::string& tmpl,
                                          std::span<const ChatMessage> messages,
                                          bool add_assistant) {
  const auto& f = lib.fn();
  if (f.chat_apply_template == nullptr) {
    return fail(ErrorKind::usage, "this libllama has no llama_chat_apply_template");
  }
  std::vector<abi::ChatMessage> chat;
  chat.reserve(messages.size());
  size_t input_bytes = 0;
  for (const auto& m : messages) {
    chat.push_back({m.role.c_str(), m.content.c_str()});
    input_bytes += m.role.size() + m.content.size();
  }
  if (input_bytes > k_max_chat_bytes) {
    return fail(ErrorKind::input, "the conversation is over 16 MiB");
  }
  // Templates add a few markers per message: twice the text and 1 KiB is room for every one.
  std::string out(2 * input_bytes + 1024, '\0');
  int32_t n = f.chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), add_assistant,
                                    out.data(), static_cast<int32_t>(out.size()));
  if (n > static_cast<int32_t>(out.size())) {
    if (static_cast<size_t>(n) > 2 * k_max_chat_bytes) {
      return fail(ErrorKind::input, "the formatted conversation is too long");
    }
    out.assign(static_cast<size_t>(n), '\0');
    n = f.chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), add_assistant, out.data(),
                              static_cast<int32_t>(out.size()));
  }
  if (n < 0) {
    return fail(ErrorKind::usage,
                fmt::format("llama.cpp does not know the chat template '{}'",
                            tmpl.size() > 60 ? tmpl.substr(0, 60) + "..." : tmpl));
  }
  out.resize(static_cast<size_t>(std::min<int32_t>(n, static_cast<int32_t>(out.size()))));
  return out;
}

}  // namespace kvprof::llama
