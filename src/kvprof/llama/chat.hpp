// Chat templates through llama.cpp's own C API: the GGUF's `tokenizer.chat_template`
// (llama_model_chat_template), llama.cpp's built-in templates by name
// (llama_chat_builtin_templates) and the formatting of a conversation
// (llama_chat_apply_template, which recognises the common templates — chatml, llama2/3,
// gemma, phi3, ... — by their text or name; it runs no Jinja).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvprof/llama/engine.hpp"
#include "kvprof/llama/library.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::llama {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// The model's chat template (its GGUF's tokenizer.chat_template); nullopt when it has none or
// the library cannot say (a libllama without llama_model_chat_template).
std::optional<std::string> model_chat_template(const LlamaModel& model);

// The names of llama.cpp's built-in templates ("chatml", "llama3", ...); empty when the library
// lacks llama_chat_builtin_templates.
std::vector<std::string> builtin_chat_templates(const LlamaLib& lib);

// `messages` formatted with `tmpl` (a template's text or a built-in name), with the assistant's
// turn opened when `add_assistant`; usage error when llama.cpp does not know the template or the
// library lacks llama_chat_apply_template, input error for more than 1 MiB of output.
Expected<std::string> apply_chat_template(const LlamaLib& lib, const std::string& tmpl,
                                          std::span<const ChatMessage> messages,
                                          bool add_assistant = true);

}  // namespace kvprof::llama
