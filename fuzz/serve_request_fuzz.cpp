// libFuzzer target for `kvprof serve`'s request reading: the input is a request body read as a
// completion, a chat (messages through chat_messages and the default chat_prompt) and a native
// /completion, against a backend that tokenizes one token per byte; a request's stop strings then
// scan the body itself, fed in pieces of 7 bytes. Must never crash or hang.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kvprof/serve/request.hpp"
#include "kvprof/serve/stop_strings.hpp"

namespace {

class ByteBackend final : public kvprof::serve::Backend {
 public:
  [[nodiscard]] std::string model_id() const override { return "fuzz"; }
  [[nodiscard]] kvprof::Expected<std::vector<int32_t>> tokenize(std::string_view text,
                                                                bool add_special) const override {
    std::vector<int32_t> out;
    if (add_special) out.push_back(1);
    for (const unsigned char c : text)
      out.push_back(c);
    return out;
  }
  [[nodiscard]] std::string detokenize(const std::vector<int32_t>&) const override { return {}; }
  [[nodiscard]] std::optional<kvprof::serve::HttpReply> admit(
      kvprof::serve::GenerateRequest&) const override {
    return std::nullopt;
  }
  uint64_t submit(kvprof::serve::GenerateRequest, kvprof::serve::EventSink) override { return 0; }
  void cancel(uint64_t) override {}
  [[nodiscard]] std::optional<kvprof::serve::HttpReply> get(std::string_view) const override {
    return std::nullopt;
  }
  [[nodiscard]] std::string error_body(int, std::string_view) const override { return {}; }
  void stop() override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1U << 20)) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const ByteBackend backend;
  using kvprof::serve::Endpoint;
  for (const Endpoint e : {Endpoint::completions, Endpoint::chat, Endpoint::native_completion}) {
    auto r = kvprof::serve::parse_request(body, e, backend);
    if (r && r->generate.prompt_tokens.empty()) __builtin_trap();  // an empty prompt is refused
    if (!r || e != Endpoint::completions) continue;
    if (r->stop.size() > kvprof::serve::k_max_stop_strings) __builtin_trap();
    kvprof::serve::StopScan scan(r->stop);
    std::string out;
    for (size_t i = 0; i < body.size(); i += 7)
      out += scan.feed(body.substr(i, 7));
    if (!scan.stopped()) out += scan.flush();
    // What goes out is the body up to the first stop string, never more.
    if (body.substr(0, out.size()) != out || (!scan.stopped() && out.size() != body.size())) {
      __builtin_trap();
    }
  }
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("messages")) {
    try {
      (void)kvprof::serve::chat_messages(doc["messages"]);
    } catch (const nlohmann::json::exception&) {
      __builtin_trap();  // chat_messages checks every type before reading it
    }
  }
  return 0;
}
