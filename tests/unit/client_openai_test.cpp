// Tests for src/kvprof/client/openai.cpp: request bodies and streamed chunk parsing.
#include "kvprof/client/openai.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvprof::client {
namespace {

using nlohmann::json;

SseEvent ev(std::string data, std::string type = "message") {
  SseEvent e;
  e.type = std::move(type);
  e.data = std::move(data);
  return e;
}

TEST(OpenAi, CompletionsBodyWithTokenIds) {
  GenerationParams p;
  p.model = "m";
  p.max_tokens = 64;
  const std::vector<uint32_t> ids = {1000, 2000, 29999};
  const json body = json::parse(build_completions_body(ids, p));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt"], json(ids));
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["temperature"], 0.0);
}

TEST(OpenAi, ChatBodyHasOneUserMessageAndNoModelWhenEmpty) {
  GenerationParams p;
  p.max_tokens = 8;
  const json body = json::parse(build_text_body(ApiKind::chat, "hello \"world\"", p));
  EXPECT_FALSE(body.contains("model"));
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "hello \"world\"");
  EXPECT_FALSE(body.contains("prompt"));
}

TEST(OpenAi, EndpointUrlJoinsBaseAndPath) {
  EXPECT_EQ(endpoint_url("http://h:8000", ApiKind::completions), "http://h:8000/v1/completions");
  EXPECT_EQ(endpoint_url("http://h:8000/v1/", ApiKind::chat), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(endpoint_url("http://h/x/v1/completions", ApiKind::chat), "http://h/x/v1/completions");
}

TEST(OpenAi, CompletionsChunkCountsOneToken) {
  auto c = parse_stream_event(
      ev(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}],"usage":null})"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, StreamChunk::Kind::data);
  EXPECT_EQ(c->text, " hi");
  EXPECT_EQ(c->n_tokens, 1u);
  EXPECT_FALSE(c->usage);
}

TEST(OpenAi, ChatRoleOnlyDeltaCountsNoToken) {
  auto role = parse_stream_event(
      ev(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"));
  ASSERT_TRUE(role);
  EXPECT_EQ(role->n_tokens, 0u);
  auto content = parse_stream_event(
      ev(R"({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]})"));
  ASSERT_TRUE(content);
  EXPECT_EQ(content->n_tokens, 1u);
  EXPECT_EQ(content->finish_reason, "length");
}

TEST(OpenAi, UsageChunk) {
  auto c = parse_stream_event(ev(
      R"({"choices":[],"usage":{"prompt_tokens":8192,"completion_tokens":64,"total_tokens":8256}})"));
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->usage);
  EXPECT_EQ(c->usage->prompt_tokens, 8192u);
  EXPECT_EQ(c->usage->completion_tokens, 64u);
  EXPECT_EQ(c->n_tokens, 0u);
}

TEST(OpenAi, ContinuousUsageGivesTokensPerChunk) {
  auto c = parse_stream_event(
      ev(R"({"choices":[{"text":"abc"}],"usage":{"prompt_tokens":4,"completion_tokens":7}})"), 4);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->n_tokens, 3u);
}

TEST(OpenAi, DoneAndErrors) {
  auto done = parse_stream_event(ev("[DONE]"));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->kind, StreamChunk::Kind::done);

  auto err = parse_stream_event(ev(R"({"error":{"message":"boom\nline","code":500}})"));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind, StreamChunk::Kind::error);
  EXPECT_EQ(err->error_message, "boom line");
  EXPECT_EQ(err->error_code, 500);

  auto typed = parse_stream_event(ev("overloaded", "error"));
  ASSERT_TRUE(typed);
  EXPECT_EQ(typed->kind, StreamChunk::Kind::error);
  EXPECT_EQ(typed->error_message, "overloaded");
}

TEST(OpenAi, MalformedEventsAreErrors) {
  EXPECT_FALSE(parse_stream_event(ev("{not json")));
  EXPECT_FALSE(parse_stream_event(ev("[1,2]")));
  EXPECT_FALSE(parse_stream_event(ev(R"({"choices":[5]})")));
}

TEST(OpenAi, ParseApiKind) {
  EXPECT_EQ(parse_api_kind("chat").value(), ApiKind::chat);
  EXPECT_FALSE(parse_api_kind("embeddings"));
}

}  // namespace
}  // namespace kvprof::client
