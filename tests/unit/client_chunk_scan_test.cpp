// Tests for src/kvprof/client/chunk_scan.cpp: the fast path must agree with a full JSON parse
// whenever it accepts a chunk, and decline what it does not handle.
#include "kvprof/client/chunk_scan.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvprof::client {
namespace {

// What a full parse says: the same fields as ScannedChunk, or nullopt when not a JSON object.
std::optional<ScannedChunk> reference(std::string_view text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  ScannedChunk out;
  if (doc.contains("choices") && doc["choices"].is_array() && !doc["choices"].empty()) {
    const auto& c = doc["choices"][0];
    if (c.contains("text") && c["text"].is_string()) {
      out.text += c["text"].get<std::string>();
      out.has_text_field = true;
    }
    if (c.contains("delta") && c["delta"].is_object()) {
      for (const char* k : {"content", "reasoning_content", "reasoning"}) {
        if (c["delta"].contains(k) && c["delta"][k].is_string()) {
          out.text += c["delta"][k].get<std::string>();
          out.has_text_field = true;
        }
      }
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      out.finish_reason = c["finish_reason"].get<std::string>();
    }
  }
  if (doc.contains("usage") && doc["usage"].is_object()) {
    out.has_usage = true;
    const auto& u = doc["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_unsigned()) {
      out.prompt_tokens = u["prompt_tokens"].get<uint64_t>();
    }
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_unsigned()) {
      out.completion_tokens = u["completion_tokens"].get<uint64_t>();
    }
  }
  return out;
}

void expect_agrees(std::string_view text) {
  ScannedChunk fast;
  if (!scan_chunk(text, fast)) return;  // declining is always allowed
  const auto ref = reference(text);
  ASSERT_TRUE(ref) << "fast path accepted invalid JSON: " << text;
  EXPECT_EQ(fast.text, ref->text) << text;
  EXPECT_EQ(fast.has_text_field, ref->has_text_field) << text;
  EXPECT_EQ(fast.finish_reason, ref->finish_reason) << text;
  EXPECT_EQ(fast.has_usage, ref->has_usage) << text;
  EXPECT_EQ(fast.prompt_tokens, ref->prompt_tokens) << text;
  EXPECT_EQ(fast.completion_tokens, ref->completion_tokens) << text;
}

const std::vector<std::string> k_chunks = {
    R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null})",
    R"({"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})",
    R"({"choices":[{"delta":{"content":"caf\u00e9"}}]})",
    R"({"choices":[{"delta":{"reasoning_content":"hm","content":null}}]})",
    "{\"choices\":[{\"text\":\"\xC3\xA9\xE2\x82\xAC\"}]}",
    "{\"choices\":[{\"text\":\"\xC3\"}]}",
    R"({"choices":[],"usage":{"prompt_tokens":8192,"completion_tokens":64,"total_tokens":8256}})",
    R"({"choices":[{"text":"a","finish_reason":"length"}],"usage":{"prompt_tokens":-1,"completion_tokens":2.5e1}})",
    R"({"usage":{"completion_tokens":18446744073709551615}})",
    R"( { "choices" : [ { "text" : "x" } , 5 , "y" ] , "extra" : [true, false, null, {"a": [1, -2.5E+3]}] } )",
    R"({"choices":[{"text":"a"}]} trailing)",
    R"({"choices":[{"text":"a"}],})",
    R"({"choices":[{"text":"a"}])",
    R"({"choices":[{"text":"a\q"}]})",
    R"({"choices":[{"text":01}]})",
    R"({"choices":"x"})",
    R"({"choices":[1]})",
    R"({"error":{"message":"x"}})",
    R"([1,2])",
    R"({"choices":[{"text":"a"}],"choices":[{"text":"b"}]})",
    R"({"a":)",
    "",
};

TEST(ChunkScan, AgreesWithAFullParseOrDeclines) {
  for (const auto& c : k_chunks)
    expect_agrees(c);
}

TEST(ChunkScan, AcceptsTheCommonShapes) {
  ScannedChunk out;
  ASSERT_TRUE(scan_chunk(k_chunks[0], out));
  EXPECT_EQ(out.text, " tok");
  EXPECT_TRUE(out.has_text_field);
  EXPECT_FALSE(out.has_usage);
  ScannedChunk usage;
  ASSERT_TRUE(scan_chunk(k_chunks[6], usage));
  EXPECT_TRUE(usage.has_usage);
  EXPECT_EQ(usage.prompt_tokens, 8192u);
  EXPECT_EQ(usage.completion_tokens, 64u);
}

TEST(ChunkScan, DeclinesErrorsEscapesAndBadSyntax) {
  ScannedChunk out;
  EXPECT_FALSE(scan_chunk(R"({"error":{"message":"x"}})", out));
  EXPECT_FALSE(scan_chunk(R"({"choices":[{"delta":{"content":"caf\u00e9"}}]})", out));
  EXPECT_FALSE(scan_chunk(R"({"choices":[{"text":"a"}]} trailing)", out));
  EXPECT_FALSE(scan_chunk("{\"choices\":[{\"text\":\"\xC3\"}]}", out));  // broken UTF-8
  EXPECT_FALSE(scan_chunk(R"({"choices":[{"text":01}]})", out));
}

// Strings are scanned 8 bytes at a time: put each byte that needs a look (or would, if the
// word test were wrong) at every offset of a 20-byte text, inside and across word boundaries.
TEST(ChunkScan, EveryByteThatNeedsALookIsSeenAtEveryOffsetOfAString) {
  const std::vector<std::string> specials = {std::string(1, '\0'),
                                             "\x01",
                                             "\x1f",
                                             "\t",
                                             "\n",
                                             "\"",
                                             "\\",
                                             "\\n",
                                             "\\u00e9",
                                             "\x7f",
                                             "\x80",
                                             "\xC3\xA9",
                                             "\xC3",
                                             "\xFF",
                                             " ",
                                             "!",
                                             "#",
                                             "[",
                                             "]",
                                             "~"};
  for (const std::string& special : specials) {
    for (size_t at = 0; at <= 20; ++at) {
      std::string text(20, 'a');
      text.insert(at, special);
      const std::string chunk = R"({"choices":[{"text":")" + text + R"("}]})";
      SCOPED_TRACE(testing::Message()
                   << "byte " << static_cast<int>(special[0] & 0xFF) << " at " << at);
      expect_agrees(chunk);
      ScannedChunk out;
      const bool plain =
          special.size() == 1 && special[0] >= 0x20 && special[0] != '"' && special[0] != '\\';
      if (plain) {
        ASSERT_TRUE(scan_chunk(chunk, out));
        EXPECT_EQ(out.text, text);
      }
    }
  }
}

TEST(ChunkScan, EveryPrefixOfAChunkAgreesOrDeclines) {
  for (const auto& c : k_chunks) {
    for (size_t n = 0; n <= c.size(); ++n)
      expect_agrees(std::string_view(c).substr(0, n));
  }
}

}  // namespace
}  // namespace kvprof::client
