#include "kvprof/util/shell.hpp"

#include <gtest/gtest.h>

namespace kvprof {
namespace {

using Words = std::vector<std::string>;

TEST(ShellWords, SplitsAsTheShellDoes) {
  EXPECT_EQ(split_shell_words("llama-server -m 'my model.gguf' -c 4096").value(),
            (Words{"llama-server", "-m", "my model.gguf", "-c", "4096"}));
  EXPECT_EQ(split_shell_words(R"(a "b \"c\" \\d $x" e\ f '' "")").value(),
            (Words{"a", R"(b "c" \d $x)", "e f", "", ""}));
  EXPECT_EQ(split_shell_words("a \\\n  b").value(), (Words{"a", "b"}));
  EXPECT_EQ(split_shell_words("  ").value(), Words{});
}

TEST(ShellWords, OperatorsAreWordsOfTheirOwn) {
  EXPECT_EQ(split_shell_words("cd /m && exec llama-server -m x;echo hi|cat >log 2>&1").value(),
            (Words{"cd", "/m", "&&", "exec", "llama-server", "-m", "x", ";", "echo", "hi", "|",
                   "cat", ">", "log", "2", ">", "&", "1"}));
  EXPECT_TRUE(is_shell_operator("&&"));
  EXPECT_TRUE(is_shell_operator(";"));
  EXPECT_FALSE(is_shell_operator("-m"));
  // Quoted, an operator is text.
  EXPECT_EQ(split_shell_words("echo 'a;b' \"c|d\"").value(), (Words{"echo", "a;b", "c|d"}));
}

TEST(ShellWords, RefusesUnclosedQuotesAndOversizeCommands) {
  EXPECT_FALSE(split_shell_words("llama-server -m 'x").has_value());
  EXPECT_FALSE(split_shell_words("llama-server -m \"x").has_value());
  EXPECT_FALSE(split_shell_words(std::string(k_max_command_chars + 1, 'a')).has_value());
  std::string many;
  for (size_t i = 0; i <= k_max_command_words; ++i)
    many += "a ";
  const auto r = split_shell_words(many);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("words"), std::string::npos);
}

TEST(ShellWords, QuoteThenSplitGivesTheWordBack) {
  for (const std::string w : {"plain", "a b", "it's", "$HOME", "x;y", "\"q\"", "back\\slash"}) {
    const auto words = split_shell_words("prog " + shell_quote(w));
    ASSERT_TRUE(words.has_value()) << w;
    ASSERT_EQ(words->size(), 2U) << w;
    EXPECT_EQ((*words)[1], w);
  }
}

}  // namespace
}  // namespace kvprof
