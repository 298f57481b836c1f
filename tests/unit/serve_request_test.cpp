// read_answer_options: the choices a request asks for, read as each engine reads them —
// llama-server refuses n != 1 in its own words; vLLM samples n (at least 1, at most the dialect's
// bound, each refusal in vLLM's words).
#include "kvprof/serve/request.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvprof::serve {
namespace {

constexpr RequestDialect k_vllm_like{true, "", 64};

Expected<uint32_t> choices(const nlohmann::json& doc, const RequestDialect& dialect) {
  ParsedRequest out;
  if (auto ok = read_answer_options(doc, dialect, out); !ok) return std::unexpected(ok.error());
  return out.n;
}

TEST(ServeRequestChoices, LlamaServerTakesOneChoiceOnly) {
  EXPECT_EQ(choices({{"n", 1}}, k_llama_server_dialect).value_or(0), 1U);
  EXPECT_EQ(choices(nlohmann::json::object(), k_llama_server_dialect).value_or(0), 1U);
  const auto two = choices({{"n", 2}}, k_llama_server_dialect);
  ASSERT_FALSE(two.has_value());
  EXPECT_EQ(two.error().kind, ErrorKind::input);
  EXPECT_EQ(two.error().message, "Only one completion choice is allowed");
}

TEST(ServeRequestChoices, VllmSamplesNWithinItsBounds) {
  EXPECT_EQ(choices({{"n", 3}}, k_vllm_like).value_or(0), 3U);
  EXPECT_EQ(choices({{"n", 64}}, k_vllm_like).value_or(0), 64U);
  const auto zero = choices({{"n", 0}}, k_vllm_like);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().message, "n must be at least 1, got 0.");
  const auto many = choices({{"n", 65}}, k_vllm_like);
  ASSERT_FALSE(many.has_value());
  EXPECT_EQ(many.error().message, "n must be at most 64, got 65.");
}

}  // namespace
}  // namespace kvprof::serve
