// `kvprof serve` applies the model's chat template (llama.cpp's llama_chat_apply_template over
// the tokenizer.chat_template `kvprof make-gguf` writes) to /v1/chat/completions: the prompt
// tokens a chat request is billed for are those of the ChatML text the messages make; response
// ids read "chatcmpl-" and "cmpl-" as OpenAI's and llama-server's do; a model without a template
// joins the messages with newlines and says so once; --chat-template takes a built-in name and
// answers an unknown one with the closest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_kvprof.hpp"
#include "support/serve_process.hpp"
#include "support/tiny_llama.hpp"

namespace {
namespace fs = std::filesystem;
using kvprof::test::http_request;
using kvprof::test::ServeProcess;
using nlohmann::json;

const char* const k_chat =
    R"({"messages":[{"role":"system","content":"w1 w2"},{"role":"user","content":"w3 w4 w5"}],
        "max_tokens":2,"ignore_eos":true})";

// The same conversation as ChatML writes it, with the assistant's turn opened.
const char* const k_chatml_text =
    "<|im_start|>system\nw1 w2<|im_end|>\n<|im_start|>user\nw3 w4 w5<|im_end|>\n"
    "<|im_start|>assistant\n";

class ServeChatTemplate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof_serve_chat_" + std::to_string(::getpid()));
    fs::remove_all(s_dir);
    fs::create_directories(s_dir);
    std::ofstream(s_dir / "config.json")
        << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":4096,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
    const std::string config = (s_dir / "config.json").string();
    s_made =
        kvprof::test::run_kvprof("make-gguf -m " + config + " -o " + (s_dir / "chat.gguf").string())
                .rc == 0 &&
        kvprof::test::run_kvprof("make-gguf -m " + config + " --no-chat-template -o " +
                                 (s_dir / "plain.gguf").string())
                .rc == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  static std::vector<std::string> args(const fs::path& lib, const char* gguf,
                                       std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"-m",          (s_dir / gguf).string(),
                                  "--llama-lib", lib.string(),
                                  "--port",      "0",
                                  "-c",          "512",
                                  "-t",          "1",
                                  "--quiet"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // The number of tokens of `text` with BOS, as the server tokenizes it.
  static size_t token_count(uint16_t port, const std::string& text) {
    const auto r = http_request(port, "POST", "/tokenize",
                                json{{"content", text}, {"add_special", true}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false).value("tokens", json::array()).size();
  }

  static json post(uint16_t port, const char* path, const std::string& body) {
    const auto r = http_request(port, "POST", path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }

  static inline fs::path s_dir;
  static inline bool s_made = false;
};

TEST_F(ServeChatTemplate, ChatIsBilledForTheTemplatedPromptAndIdsHaveOpenAisPrefixes) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_made);
  ServeProcess serve(args(*lib_dir, "chat.gguf"));
  ASSERT_NE(serve.port(), 0) << serve.first_line();
  const uint16_t port = serve.port();

  const size_t templated = token_count(port, k_chatml_text);
  const size_t joined = token_count(port, "w1 w2\nw3 w4 w5");
  ASSERT_GT(templated, joined + 10);  // the markers are many byte tokens in this vocabulary
  const json chat = post(port, "/v1/chat/completions", k_chat);
  EXPECT_EQ(chat["usage"]["prompt_tokens"], templated) << chat.dump();
  EXPECT_EQ(chat["usage"]["completion_tokens"], 2);
  const std::string chat_id = chat["id"];
  EXPECT_TRUE(chat_id.starts_with("chatcmpl-")) << chat_id;
  EXPECT_EQ(chat_id.find("sim"), std::string::npos) << chat_id;

  // Streamed: the same prompt, every chunk with the one id.
  json streamed = json::parse(k_chat);
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const auto stream = http_request(port, "POST", "/v1/chat/completions", streamed.dump());
  EXPECT_NE(stream.body.find("\"prompt_tokens\":" + std::to_string(templated)), std::string::npos)
      << stream.body;
  EXPECT_NE(stream.body.find("\"id\":\"chatcmpl-"), std::string::npos) << stream.body;

  const json completion = post(port, "/v1/completions", R"({"prompt":"w1 w2","max_tokens":1})");
  const std::string id = completion["id"];
  EXPECT_TRUE(id.starts_with("cmpl-")) << id;
  EXPECT_EQ(id.find("sim"), std::string::npos) << id;
  EXPECT_NE(id.substr(5), chat_id.substr(9)) << "each request has its own id";

  // llama-server's /apply-template and /props show the template applied.
  EXPECT_EQ(post(port, "/apply-template", k_chat)["prompt"], k_chatml_text);
  const json props = json::parse(http_request(port, "GET", "/props").body, nullptr, false);
  EXPECT_NE(props.value("chat_template", "").find("<|im_start|>"), std::string::npos);
}

TEST_F(ServeChatTemplate, WithoutATemplateMessagesAreJoinedAndAWarningSaysSoOnce) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_made);
  {
    ServeProcess serve(args(*lib_dir, "plain.gguf"));
    ASSERT_NE(serve.port(), 0) << serve.first_line();
    const json chat = post(serve.port(), "/v1/chat/completions", k_chat);
    EXPECT_EQ(chat["usage"]["prompt_tokens"], token_count(serve.port(), "w1 w2\nw3 w4 w5"));
  }
  // The warning, once, however many chat requests come (here: none, a startup line).
  const auto r =
      kvprof::test::run_kvprof("serve -m " + (s_dir / "plain.gguf").string() + " --llama-lib " +
                               lib_dir->string() + " --port 0 -c 512 -t 1 --quiet --duration 0.2");
  EXPECT_EQ(r.rc, 0) << r.out;
  const std::string warning = "has no chat template";
  const auto first = r.out.find(warning);
  EXPECT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(warning, first + 1), std::string::npos) << r.out;
}

TEST_F(ServeChatTemplate, ChatTemplateFlagTakesABuiltInNameAndSuggestsForATypo) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_made);
  {
    // llama.cpp's built-in chatml on a model without a template: the same prompt as the GGUF's.
    ServeProcess serve(args(*lib_dir, "plain.gguf", {"--chat-template", "chatml"}));
    ASSERT_NE(serve.port(), 0) << serve.first_line();
    const json chat = post(serve.port(), "/v1/chat/completions", k_chat);
    EXPECT_EQ(chat["usage"]["prompt_tokens"], token_count(serve.port(), k_chatml_text));
  }
  const auto r = kvprof::test::run_kvprof("serve -m " + (s_dir / "chat.gguf").string() +
                                          " --llama-lib " + lib_dir->string() +
                                          " --port 0 -c 512 -t 1 --quiet --chat-template chatmll");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean chatml"), std::string::npos) << r.out;
}

}  // namespace
