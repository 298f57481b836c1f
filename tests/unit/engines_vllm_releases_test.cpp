// vLLM releases as rules (estimate/vllm_version.cpp): parsing --engine-version and what each
// release changes in the plan (the plan against each release's public startups is in
// analysis_engine_versions_test.cpp).
#include "kvprof/engines/vllm/releases.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner the engines build on

namespace {

std::string_view name_of(std::string_view text) {
  auto r = parse_vllm_version(text);
  return r ? (*r)->name : std::string_view("error");
}

TEST(VllmVersion, ParsesReleasesToTheRowThatCoversThem) {
  EXPECT_EQ(name_of("0.6"), "v0.6");
  EXPECT_EQ(name_of("0.6.4"), "v0.6");
  EXPECT_EQ(name_of("0.6.5"), "v0.7");  // the baseline snapshot (#10511) came with v0.6.5
  EXPECT_EQ(name_of("v0.7.3"), "v0.7");
  EXPECT_EQ(name_of("0.8.4"), "v0.8");
  EXPECT_EQ(name_of("0.8.5.post1"), "v0.8.5");
  EXPECT_EQ(name_of("0.9.0"), "v0.9");
  EXPECT_EQ(name_of("0.9.1"), "v0.10");  // #19312 stopped charging the CUDA context
  EXPECT_EQ(name_of("0.10"), "v0.10");
  EXPECT_EQ(name_of("V0.11.0rc1"), "v0.11");
  EXPECT_EQ(name_of("0.11.1"), "v0.15");  // #26016: capture sizes in steps of 16 above 256
  EXPECT_EQ(name_of("0.12"), "v0.15");
  EXPECT_EQ(name_of("0.14.1"), "v0.15");
  EXPECT_EQ(name_of("0.15.1"), "v0.15");
  EXPECT_EQ(name_of("0.16.0"), "v0.15");
  EXPECT_EQ(name_of("0.17.0"), "v0.19");
  EXPECT_EQ(name_of("0.19.0"), "v0.19");
  EXPECT_EQ(name_of("0.20.0"), "v0.20");  // #38284: the graphs' estimate inside the budget
  EXPECT_EQ(name_of("v0.32.1"), "v0.20");
  for (const auto& v : vllm_versions())
    EXPECT_EQ(name_of(v.name), v.name);  // every row's own name reads back
  EXPECT_EQ(name_of("latest"), "v0.20");
  EXPECT_EQ(name_of(""), "v0.19");  // the default: the newest release checked on startups
  EXPECT_EQ(&vllm_latest_version(), &vllm_versions().back());
  EXPECT_EQ(&vllm_default_version(), &*parse_vllm_version("0.19").value());
}

TEST(VllmVersion, UnmodelledReleaseIsAUsageErrorListingTheSupportedOnes) {
  for (const char* bad : {"0.5.4", "0.100", "1.0", "abc", "0.", "v", "0.7x"}) {
    auto r = parse_vllm_version(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::usage);
    for (const auto& v : vllm_versions())
      EXPECT_NE(r.error().message.find(v.name), std::string::npos) << r.error().message;
  }
}

class VllmVersionPlan : public ::testing::Test {
 protected:
  static Estimate plan(std::string_view version, std::string_view model, uint64_t max_model_len,
                       std::optional<uint32_t> tokens = std::nullopt,
                       std::optional<uint32_t> seqs = std::nullopt, std::string_view gpu = "H100") {
    EstimateInput in;
    in.model = *model::catalog_model(model);
    in.gpu = *gpu::find_gpu(gpu);
    in.settings.engine_version = std::string(version);
    in.settings.max_model_len = max_model_len;
    in.settings.max_num_batched_tokens = tokens;
    in.settings.max_num_seqs = seqs;
    auto est = engines::plan(in);
    EXPECT_TRUE(est.has_value()) << est.error().message;
    return *est;
  }
};

TEST_F(VllmVersionPlan, BatchDefaultsFollowTheRelease) {
  const char* llama = "llama-3.1-8b";
  // V0 profiles one unchunked batch of max_model_len tokens up to 32k, chunks above.
  auto v07 = plan("0.7", llama, 16384);
  EXPECT_EQ(v07.engine_report.max_num_batched_tokens, 16384U);
  EXPECT_EQ(v07.engine_report.max_num_seqs, 256U);
  EXPECT_EQ(plan("0.7", llama, 131072).engine_report.max_num_batched_tokens, 2048U);
  EXPECT_EQ(plan("0.6", llama, 131072).engine_report.max_num_batched_tokens, 512U);
  EXPECT_EQ(plan("0.7", llama, 1024).engine_report.max_num_batched_tokens, 2048U);
  // V1 before v0.8.5: 8192 tokens on GPUs named H100/H200, 1024 sequences on every GPU.
  const auto batch = [&](const char* v, const char* gpu) {
    const auto e = plan(v, llama, 8192, std::nullopt, std::nullopt, gpu).engine_report;
    return std::pair{e.max_num_batched_tokens, e.max_num_seqs};
  };
  EXPECT_EQ(batch("0.8", "H100"), std::pair(8192U, 1024U));
  EXPECT_EQ(batch("0.8", "L40S"), std::pair(2048U, 1024U));
  EXPECT_EQ(batch("0.8", "A100-80GB"), std::pair(2048U, 1024U));
  // v0.8.5: by memory (>= 70 GiB); from v0.9.0 A100s are left out.
  EXPECT_EQ(batch("0.8.5", "L40S"), std::pair(2048U, 256U));
  EXPECT_EQ(batch("0.8.5", "A100-80GB"), std::pair(8192U, 1024U));
  EXPECT_EQ(batch("0.9", "A100-80GB"), std::pair(2048U, 256U));
  EXPECT_EQ(batch("0.19", "H100"), std::pair(8192U, 1024U));
  EXPECT_EQ(batch("0.19", "H200"), std::pair(8192U, 1024U));
}

TEST_F(VllmVersionPlan, TheDummySamplerCostsMorePerLogitBeforeV017) {
  // Qwen3-14B on an H100 (1024 sequences x 151,936 logits): the llm-d sweep printed 5.64 GiB of
  // activation peak on v0.15/v0.16 and 2.23 GiB from v0.17.
  const auto v15 = plan("0.15", "qwen3-14b", 8192);
  const auto v19 = plan("0.17", "qwen3-14b", 8192);
  EXPECT_NEAR(bytes_to_gib(v15.per_gpu.activation_bytes), 5.64, 0.1);
  EXPECT_NEAR(bytes_to_gib(v19.per_gpu.activation_bytes), 2.23, 0.1);
  EXPECT_LT(v15.engine_report.kv_cache_tokens, v19.engine_report.kv_cache_tokens);
}

TEST_F(VllmVersionPlan, FromV020TheKvBudgetPaysForTheEstimatedCudaGraphs) {
  // Same batch and utilization: v0.20 takes the graphs' estimate out of the KV budget that v0.19
  // left them outside of, and says so in the lines it prints.
  EstimateInput in;
  in.model = *model::catalog_model("llama-3.1-8b");
  in.gpu = *gpu::find_gpu("H100");
  in.settings.max_model_len = 8192;
  in.settings.gpu_memory_utilization = 0.9;
  in.settings.engine_version = "0.19";
  const auto v19 = engines::plan(in).value();
  in.settings.engine_version = "0.20";
  const auto v20 = engines::plan(in).value();
  ASSERT_GT(v20.per_gpu.cuda_graph_bytes, 256ULL << 20);
  EXPECT_EQ(v20.per_gpu.cuda_graph_bytes, v19.per_gpu.cuda_graph_bytes);
  EXPECT_EQ(v19.engine_report.available_kv_cache_bytes - v20.engine_report.available_kv_cache_bytes,
            v20.per_gpu.cuda_graph_bytes);
  EXPECT_LT(v20.engine_report.num_gpu_blocks, v19.engine_report.num_gpu_blocks);
  const auto& lines = v20.engine_report.log_lines;
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.starts_with("Estimated CUDA graph memory: ") &&
           l.find("GiB total") != std::string::npos;
  }));
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.starts_with("CUDA graph memory profiling is enabled") &&
           l.find("--gpu-memory-utilization=0.9000 is equivalent to") != std::string::npos;
  }));
  // Unset, the utilization is v0.20's new default of 0.92.
  in.settings.gpu_memory_utilization.reset();
  EXPECT_DOUBLE_EQ(engines::plan(in).value().engine_report.memory_fraction, 0.92);
  in.settings.engine_version = "0.19";
  EXPECT_DOUBLE_EQ(engines::plan(in).value().engine_report.memory_fraction, 0.9);
  // Without graphs there is nothing to estimate.
  in.settings.engine_version = "0.20";
  in.settings.enforce_eager = true;
  const auto eager = engines::plan(in).value();
  EXPECT_EQ(eager.per_gpu.cuda_graph_bytes, 0U);
  for (const auto& l : eager.engine_report.log_lines)
    EXPECT_FALSE(l.starts_with("Estimated CUDA graph memory")) << l;
}

TEST_F(VllmVersionPlan, SparseAttentionTakesBlocksOf64) {
  // FlashMLA-sparse and the DSA indexer support only 64-token blocks.
  const auto est = plan("0.19", "deepseek-v3.2", 163840, std::nullopt, std::nullopt, "H200");
  EXPECT_EQ(est.engine_report.block_size, 64U);
  EXPECT_EQ(est.engine_report.kv_cache_tokens % 64, 0U);
  EXPECT_EQ(plan("0.19", "deepseek-v3", 8192).engine_report.block_size, 16U);
}

TEST_F(VllmVersionPlan, GpusOnPcieHoldNoLargeTensorParallelBuffers) {
  // NCCL's NVLS and the symmetric-memory all-reduce need NVLink: a TP group of PCIe cards keeps
  // only the cuBLAS and sampler workspaces (8 x L40S on v0.10.2: 0.18 GiB of non-torch memory).
  EstimateInput in;
  in.model = *model::catalog_model("llama-3.1-70b");
  in.settings.tensor_parallel_size = 4;
  in.settings.max_model_len = 8192;
  in.gpu = *gpu::find_gpu("L40S");
  const auto l40s = engines::plan(in).value();
  in.gpu = *gpu::find_gpu("H100");
  const auto h100 = engines::plan(in).value();
  EXPECT_LT(l40s.per_gpu.non_torch_bytes, 512ULL << 20);
  EXPECT_GT(h100.per_gpu.non_torch_bytes, 1ULL << 30);
  EXPECT_EQ(h100.per_gpu.non_torch_bytes - l40s.per_gpu.non_torch_bytes, tp_comm_bytes(4));
}

TEST_F(VllmVersionPlan, AnOlderReleaseSaysHowFarItsRulesWereCheckedAndLowersTheConfidence) {
  for (const auto& v : vllm_versions()) {
    const auto est = plan(v.name.substr(1), "llama-3.1-8b", 8192);
    const bool latest = &v == &vllm_default_version();
    const auto said = std::find_if(est.warnings.begin(), est.warnings.end(), [&](const auto& w) {
      return w.find("kvprof's rules for vLLM " + std::string(v.name) + " are") != std::string::npos;
    });
    EXPECT_EQ(said != est.warnings.end(), !latest) << v.name;
    EXPECT_EQ(est.confidence == "high", latest) << v.name << ": " << est.confidence;
  }
  EXPECT_EQ(plan("0.9", "llama-3.1-8b", 8192).confidence, "low");  // never checked
  EXPECT_EQ(plan("0.11", "llama-3.1-8b", 8192).confidence, "medium");
  EXPECT_EQ(plan("0.7", "llama-3.1-8b", 8192).confidence, "medium");
}

TEST_F(VllmVersionPlan, EarlyV1ChargesTheCudaContextToTheKvBudget) {
  // Same batch, same sampler: v0.8 and v0.10 differ by the CUDA context the budget pays.
  const auto v08 = plan("0.8", "llama-3.1-8b", 8192, 2048, 256);
  const auto v10 = plan("0.10", "llama-3.1-8b", 8192, 2048, 256);
  EXPECT_EQ(v10.engine_report.available_kv_cache_bytes - v08.engine_report.available_kv_cache_bytes,
            k_cuda_context_bytes);
  EXPECT_EQ(v08.per_gpu.weights_bytes, v10.per_gpu.weights_bytes);
}

TEST_F(VllmVersionPlan, SlidingWindowLayersKeepAFullCacheBeforeTheHybridAllocator) {
  // Gemma 2 alternates sliding and full layers: without per-kind groups (V0, v0.8) every layer
  // caches every token, so fewer tokens fit in the same memory.
  const auto v08 = plan("0.8", "gemma-2-9b", 8192, 2048, 256);
  const auto v10 = plan("0.10", "gemma-2-9b", 8192, 2048, 256);
  EXPECT_EQ(v08.engine_report.num_kv_cache_groups, 1U);
  EXPECT_GT(v10.engine_report.num_kv_cache_groups, 1U);
  EXPECT_LT(v08.engine_report.kv_cache_tokens, v10.engine_report.kv_cache_tokens);
}

TEST_F(VllmVersionPlan, LogLinesUseTheReleasesWording) {
  auto has = [](const Estimate& e, std::string_view text) {
    for (const auto& l : e.engine_report.log_lines) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  };
  const auto v06 = plan("0.6", "llama-3.1-8b", 8192);
  EXPECT_TRUE(has(v06, "# GPU blocks: "));
  EXPECT_TRUE(has(v06, "Loading model weights took"));
  const auto v07 = plan("0.7", "llama-3.1-8b", 8192);
  EXPECT_TRUE(has(v07, "# CUDA blocks: "));
  EXPECT_TRUE(has(v07, "the rest of the memory reserved for KV Cache is"));
  EXPECT_TRUE(has(v07, "Maximum concurrency for 8192 tokens per request"));
  const auto v08 = plan("0.8", "llama-3.1-8b", 8192);
  EXPECT_FALSE(has(v08, "Available KV cache memory"));
  EXPECT_TRUE(has(v08, "GPU KV cache size: "));
  const auto v19 = plan("0.19", "llama-3.1-8b", 8192);
  EXPECT_TRUE(has(v19, "Available KV cache memory"));
  EXPECT_TRUE(has(v19, "Maximum concurrency for 8,192 tokens per request"));
  EXPECT_EQ(v19.settings.engine_version, "v0.19");
  // V0 captures one graph per size up to max_num_seqs; v0.19 full and piecewise graphs.
  EXPECT_EQ(v07.engine_report.cuda_graphs, 35U);
  EXPECT_GT(v19.engine_report.cuda_graphs, 35U);
}

}  // namespace
}  // namespace kvprof::engines
