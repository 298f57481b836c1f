// `kvprof estimate --engine-version`: the release named in the text and the JSON, a usage error
// (exit 2) listing the modelled releases for any other.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/run_kvprof.hpp"

namespace {

TEST(CliEstimateVersion, NamesTheModelledReleaseEverywhere) {
  const auto j = kvprof::test::run_kvprof("estimate --engine-version v0.7.3 --json");
  ASSERT_EQ(j.rc, 0) << j.out;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc.at("assumptions").at("engine_version_modelled"), "v0.7");
  const auto text = kvprof::test::run_kvprof("estimate --engine-version 0.7");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("engine vllm v0.7"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("vllm v0.7 will log"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("# CUDA blocks:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("as kvprof models v0.7"), std::string::npos) << text.out;
}

TEST(CliEstimateVersion, UnknownReleaseIsAUsageError) {
  const auto r = kvprof::test::run_kvprof("estimate --engine-version 0.4.2");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("not a modelled vLLM release"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("v0.19"), std::string::npos) << r.out;
  const auto other = kvprof::test::run_kvprof("estimate --engine sglang --engine-version 0.7");
  EXPECT_EQ(other.rc, 2) << other.out;
  EXPECT_NE(other.out.find("not a modelled SGLang release"), std::string::npos) << other.out;
  const auto llama = kvprof::test::run_kvprof("estimate --engine llamacpp --engine-version master");
  EXPECT_EQ(llama.rc, 2) << llama.out;
  EXPECT_NE(llama.out.find("names no llama.cpp release"), std::string::npos) << llama.out;
  const auto hf = kvprof::test::run_kvprof("estimate --engine hf --engine-version 4.50");
  EXPECT_EQ(hf.rc, 2) << hf.out;
  EXPECT_NE(hf.out.find("without versions"), std::string::npos) << hf.out;
}

TEST(CliEstimateVersion, SglangAndTensorRtLlmReleasesToo) {
  const auto j = kvprof::test::run_kvprof(
      "estimate --engine sglang --engine-version 0.4.8 -m llama-3.1-8b --gpu H100 --json");
  ASSERT_EQ(j.rc, 0) << j.out;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc.at("assumptions").at("engine_version_modelled"), "v0.4.7.post1");
  // v0.4.7.post1 - v0.4.9.post2 keep 9.5 + TP/2 GiB out of an 80 GB card's static pool.
  EXPECT_DOUBLE_EQ(doc.at("engine_report").at("memory_fraction").get<double>(), 0.874);
  const auto text = kvprof::test::run_kvprof("estimate --engine sglang --engine-version 0.5.6");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("engine sglang v0.5.3"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("max_running_requests="), std::string::npos) << text.out;
  const auto trt = kvprof::test::run_kvprof("estimate --engine trtllm --engine-version 1.2 --json");
  ASSERT_EQ(trt.rc, 0) << trt.out;
  EXPECT_EQ(nlohmann::json::parse(trt.out).at("assumptions").at("engine_version_modelled"), "1.x");
}

}  // namespace
