// Tests for src/kvprof/sim/tokenizer.cpp: the stand-in tokenization rules.
#include "kvprof/sim/tokenizer.hpp"

#include <gtest/gtest.h>

namespace kvprof::sim {
namespace {

TEST(SimTokenizer, OneTokenPerShortWordAndPerFourBytesOfLongWords) {
  EXPECT_EQ(sim_tokenize("").size(), 0u);
  EXPECT_EQ(sim_tokenize("  hi\tall \n").size(), 2u);
  EXPECT_EQ(sim_tokenize("hello world").size(), 4u);  // "hell" "o" "worl" "d"
}

TEST(SimTokenizer, CountsFollowTheDocumentedRule) {
  EXPECT_EQ(sim_tokenize("a bc def ghij").size(), 4u);
  EXPECT_EQ(sim_tokenize("abcdefghi").size(), 3u);  // 4 + 4 + 1 bytes
  EXPECT_EQ(sim_tokenize("abcdefgh  xy").size(), 3u);
}

TEST(SimTokenizer, EqualTextGivesEqualIds) {
  EXPECT_EQ(sim_tokenize("the cat sat"), sim_tokenize("the  cat\nsat"));
  EXPECT_NE(sim_tokenize("the cat"), sim_tokenize("the dog"));
}

TEST(SimTokenizer, GeneratedTokenTextReadsBackAsOneToken) {
  for (uint32_t id : {0u, 1u, 255u, 31999u, 46655u, 46656u, 123456u}) {
    const std::string text = sim_token_text(id);
    EXPECT_EQ(text.front(), ' ');
    EXPECT_EQ(sim_tokenize(text).size(), 1u) << text;
  }
  std::string many;
  for (uint32_t id = 0; id < 50; ++id)
    many += sim_token_text(id * 977);
  EXPECT_EQ(sim_tokenize(many).size(), 50u);
}

TEST(SimTokenizer, ChatAddsTwoTokensPerMessageAndOneAtTheEnd) {
  const auto messages = nlohmann::json::parse(
      R"([{"role":"system","content":"be nice"},
          {"role":"user","content":[{"type":"text","text":"hi you"}]}])");
  const auto tokens = sim_tokenize_chat(messages);
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 2u + 2u + 2u + 2u + 1u);
  EXPECT_FALSE(sim_tokenize_chat(nlohmann::json::array()).has_value());
  EXPECT_FALSE(sim_tokenize_chat(nlohmann::json::parse(R"([{"content":"x"}])")).has_value());
  EXPECT_FALSE(
      sim_tokenize_chat(nlohmann::json::parse(R"([{"role":"user","content":5}])")).has_value());
}

TEST(SimTokenizer, PromptAcceptsStringTokenIdsAndSingletonBatches) {
  EXPECT_EQ(sim_tokenize_prompt(nlohmann::json("one two"))->size(), 2u);
  EXPECT_EQ(*sim_tokenize_prompt(nlohmann::json::parse("[5, 6, 7]")),
            (std::vector<uint32_t>{5, 6, 7}));
  EXPECT_EQ(sim_tokenize_prompt(nlohmann::json::parse(R"(["one two six"])"))->size(), 3u);
  EXPECT_FALSE(sim_tokenize_prompt(nlohmann::json::parse(R"(["a", "b"])")).has_value());
  EXPECT_FALSE(sim_tokenize_prompt(nlohmann::json::parse("[-1]")).has_value());
  EXPECT_FALSE(sim_tokenize_prompt(nlohmann::json::parse("[1.5]")).has_value());
  EXPECT_FALSE(sim_tokenize_prompt(nlohmann::json::parse("{}")).has_value());
  EXPECT_FALSE(sim_tokenize_prompt(nlohmann::json::array()).has_value());
}

}  // namespace
}  // namespace kvprof::sim
