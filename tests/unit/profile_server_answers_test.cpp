// The readers of a server's answers on the shapes vLLM, SGLang and llama.cpp send, and on bodies
// that would break a run's JSON files: long or non-UTF-8 text comes back bounded and valid.
#include "kvprof/profile/server_answers.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace kvprof::profile {
namespace {

using nlohmann::json;

TEST(ServerAnswers, ModelListOfVllmAndLlamaCpp) {
  ServerInfo vllm;
  ASSERT_TRUE(read_model_list(
      R"({"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model",
          "owned_by":"vllm","max_model_len":131072},{"id":"lora-a","owned_by":"other"}]})",
      vllm));
  EXPECT_EQ(vllm.models, (std::vector<std::string>{"meta-llama/Llama-3.1-8B-Instruct", "lora-a"}));
  EXPECT_EQ(vllm.max_model_len_tokens.at("meta-llama/Llama-3.1-8B-Instruct"), 131072U);
  EXPECT_FALSE(vllm.max_model_len_tokens.contains("lora-a"));
  EXPECT_EQ(vllm.owned_by, "vllm");  // the first model's

  ServerInfo llama;
  ASSERT_TRUE(read_model_list(
      R"({"models":[{"name":"m.gguf"}],"object":"list","data":[{"id":"m.gguf","owned_by":"llamacpp",
          "meta":{"n_ctx_train":131072,"n_vocab":151936}}]})",
      llama));
  EXPECT_EQ(llama.models, std::vector<std::string>{"m.gguf"});
  EXPECT_TRUE(llama.max_model_len_tokens.empty());
  EXPECT_EQ(llama.vocab_tokens.at("m.gguf"), 151936U);  // token-ID prompts stay below it
  EXPECT_TRUE(vllm.vocab_tokens.empty());
  // A vocabulary no model has (negative, absurdly large, not a number) is not believed.
  for (const char* bad : {"-5", "99999999999", "\"many\"", "1.5"}) {
    ServerInfo odd;
    ASSERT_TRUE(read_model_list(
        std::string(R"({"data":[{"id":"m","meta":{"n_vocab":)") + bad + "}}]}", odd));
    EXPECT_TRUE(odd.vocab_tokens.empty()) << bad;
  }
}

TEST(ServerAnswers, ModelListOfAnotherShapeIsNoList) {
  for (const char* body : {"", "[]", "{}", R"({"data":{}})", "<html>", R"({"data":[1,)"}) {
    ServerInfo info;
    EXPECT_FALSE(read_model_list(body, info)) << body;
  }
  ServerInfo odd;  // entries of the wrong shape are skipped, the list is still a list
  ASSERT_TRUE(read_model_list(R"({"data":[1,"x",{"id":5},{"id":"ok","max_model_len":-1}]})", odd));
  EXPECT_EQ(odd.models, std::vector<std::string>{"ok"});
  EXPECT_TRUE(odd.max_model_len_tokens.empty());
}

TEST(ServerAnswers, ModelIdsWithControlCharactersOrBadBytesAreNotTaken) {
  // An escape sequence would reach the terminal raw; bad bytes could not be sent back as JSON.
  ServerInfo info;
  ASSERT_TRUE(read_model_list(
      "{\"data\":[{\"id\":\"\\u001b[2Jevil\"},{\"id\":\"tab\\there\"},{\"id\":\"ok-model\"}]}",
      info));
  EXPECT_EQ(info.models, (std::vector<std::string>{"ok-model"}));
}

TEST(ServerAnswers, ModelListIsBounded) {
  json data = json::array();
  for (int i = 0; i < 100; ++i)
    data.push_back({{"id", "m" + std::to_string(i)}, {"max_model_len", 10}});
  data.push_back({{"id", std::string(600, 'x')}});
  ServerInfo info;
  ASSERT_TRUE(read_model_list(json{{"data", data}}.dump(), info));
  EXPECT_EQ(info.models.size(), 64U);
  EXPECT_EQ(info.max_model_len_tokens.size(), 64U);
}

TEST(ServerAnswers, VersionIsCutBetweenCharacters) {
  EXPECT_EQ(read_server_version(R"({"version":"0.19.0"})"), "0.19.0");
  EXPECT_EQ(read_server_version(R"({"version":1})"), "");
  EXPECT_EQ(read_server_version("not json"), "");
  std::string euros;
  for (int i = 0; i < 60; ++i)
    euros += "\xe2\x82\xac";  // 180 bytes; a 128-byte cut would fall inside the 43rd
  const std::string v = read_server_version(json{{"version", euros}}.dump());
  EXPECT_EQ(v, euros.substr(0, 42 * 3));
  EXPECT_NO_THROW((void)json(v).dump());
}

TEST(ServerAnswers, PropsContextAndTokenCounts) {
  const auto props = read_props_facts(
      R"({"default_generation_settings":{"n_ctx":4096},"total_slots":4,"model_path":"/m/q.gguf"})");
  ASSERT_TRUE(props);
  EXPECT_EQ(props->slot_context_tokens, 4096U);
  EXPECT_EQ(props->total_slots, 4U);
  EXPECT_EQ(props->model_path, "/m/q.gguf");
  EXPECT_FALSE(
      read_props_facts(R"({"default_generation_settings":{"n_ctx":0}})")->slot_context_tokens);
  EXPECT_FALSE(read_props_facts(R"({"default_generation_settings":[]})")->slot_context_tokens);
  EXPECT_FALSE(read_props_facts(R"({"default_generation_settings":{},"total_slots":0})")
                   ->total_slots);                      // 1 to 4096
  EXPECT_FALSE(read_props_facts(R"({"n_ctx":4096})"));  // not llama.cpp's /props
  EXPECT_EQ(read_tokenize_count(R"({"count":4,"tokens":[1,2,3,4,5]})"), 4U);  // vLLM: count
  EXPECT_EQ(read_tokenize_count(R"({"tokens":[128000,9906,1917]})"), 3U);     // llama.cpp
  EXPECT_FALSE(read_tokenize_count(R"({"count":-1})"));
  EXPECT_FALSE(read_tokenize_count("[1,2]"));
}

TEST(ServerAnswers, MessagesAreBoundedPrintableUtf8) {
  // A proxy's Latin-1 error page: raw bytes that are not UTF-8.
  const std::string page = "<title>502 Bad Gateway \xe9\xff</title>\r\n<body>";
  const std::string m = server_message(page);
  EXPECT_EQ(m, "<title>502 Bad Gateway \xef\xbf\xbd\xef\xbf\xbd</title>");
  EXPECT_NO_THROW((void)json(m).dump());
  // A 300-byte cut that would fall inside a two-byte character.
  const std::string long_message = std::string(299, 'a') + "\xc3\xa9\xc3\xa9";
  const std::string cut = server_message(json{{"error", long_message}}.dump());
  EXPECT_EQ(cut, std::string(299, 'a') + "...");
  EXPECT_NO_THROW((void)json(cut).dump());
  EXPECT_EQ(server_message(R"({"error":"a\u0007b"})"), "a?b");
}

TEST(ServerAnswers, PropsStateTheBuildAndKvprofServesBuffers) {
  EXPECT_FALSE(read_props_facts(R"({"data":[]})").has_value());  // not llama.cpp's /props
  EXPECT_FALSE(read_props_facts("not json").has_value());
  // A llama-server's /props: its build, no buffer sizes.
  const auto plain = read_props_facts(
      R"({"default_generation_settings":{"n_ctx":4096},"build_info":"b6527-abc1234"})");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->build, "b6527-abc1234");
  EXPECT_FALSE(plain->buffers.has_value());
  const auto served = read_props_facts(
      R"({"build_info":"kvprof","kvprof":{"memory":{"buffers":[{"buffer_type":"CPU",)"
      R"("model_bytes":1000,"context_bytes":2000,"compute_bytes":0},"junk"]}}})");
  ASSERT_TRUE(served && served->buffers);
  const auto& figures = served->buffers->figures;
  ASSERT_EQ(figures.size(), 2U);  // a zero buffer is not a figure
  EXPECT_EQ(figures[0].component, enginelog::Component::weights);
  EXPECT_EQ(figures[0].device, "CPU");
  EXPECT_EQ(figures[1].component, enginelog::Component::kv_cache);
  EXPECT_EQ(figures[1].size.bytes, 2000U);
  // Past 64 buffers nothing is read.
  std::string many = R"({"build_info":"x","kvprof":{"memory":{"buffers":[)";
  for (int i = 0; i < 65; ++i)
    many += std::string(i == 0 ? "" : ",") + R"({"buffer_type":"CPU","model_bytes":1})";
  EXPECT_FALSE(read_props_facts(many + "]}}}")->buffers.has_value());
}

}  // namespace
}  // namespace kvprof::profile
