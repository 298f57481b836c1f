// Secret redaction of recorded commands and URLs.
#include "kvprof/util/redact.hpp"

#include <gtest/gtest.h>

namespace kvprof {
namespace {

TEST(Redact, FlagValuesInBothSpellings) {
  EXPECT_EQ(redact_secrets("vllm serve m --api-key sk-123 --port 8000"),
            "vllm serve m --api-key *** --port 8000");
  EXPECT_EQ(redact_secrets("vllm serve m --api-key=sk-123"), "vllm serve m --api-key=***");
  EXPECT_EQ(redact_secrets("x --hf-token 'hf_abc def' --max-num-seqs 4"),
            "x --hf-token *** --max-num-seqs 4");
  EXPECT_EQ(redact_secrets("x --db-password \"p w\""), "x --db-password ***");
  EXPECT_EQ(redact_secrets("x --max-num-batched-tokens 8192 --token-budget 4"),
            "x --max-num-batched-tokens 8192 --token-budget 4");
  EXPECT_EQ(redact_secrets("KVPROF_MAX_TOKENS=64 x"), "KVPROF_MAX_TOKENS=64 x");
}

TEST(Redact, EnvironmentAssignmentsBearerAndUrlPasswords) {
  EXPECT_EQ(redact_secrets("HF_TOKEN=hf_abc OPENAI_API_KEY=sk-1 CUDA_VISIBLE_DEVICES=0 vllm serve"),
            "HF_TOKEN=*** OPENAI_API_KEY=*** CUDA_VISIBLE_DEVICES=0 vllm serve");
  EXPECT_EQ(redact_secrets("env aws_secret_access_key=abc; run"),
            "env aws_secret_access_key=***; run");
  EXPECT_EQ(redact_secrets("curl -H 'Authorization: Bearer abc.def'"),
            "curl -H 'Authorization: Bearer ***'");
  EXPECT_EQ(redact_secrets("http://user:hunter2@node1:8000/v1"), "http://user:***@node1:8000/v1");
  EXPECT_EQ(redact_secrets("http://node1:8000/v1"), "http://node1:8000/v1");
  EXPECT_EQ(redact_secrets("vllm serve {model} --port {port}"), "vllm serve {model} --port {port}");
}

}  // namespace
}  // namespace kvprof
