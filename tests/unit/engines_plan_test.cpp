// The engine profiles end to end: verdicts, impossible settings, inverse questions, engines'
// own budget rules, speculative decoding.
#include "kvprof/engines/registry.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "kvprof/estimate/inverse.hpp"
#include "kvprof/model/catalog.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner the engines build on

namespace {

EstimateInput input(const char* model_id, const char* gpu_name,
                    engines::Engine engine = engines::Engine::vllm) {
  EstimateInput in;
  in.model = model::catalog_model(model_id).value();
  in.gpu = gpu::find_gpu(gpu_name).value();
  in.settings.engine = engine;
  return in;
}

TEST(Estimate, Llama8BOnH100FitsWithVllmDefaults) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.max_model_len = 8192;
  const auto est = plan(in).value();
  EXPECT_EQ(est.verdict, Verdict::fits);
  EXPECT_EQ(*est.settings.gpu_memory_utilization, 0.9);
  EXPECT_EQ(*est.settings.max_num_seqs, 1024U);  // >= 70 GiB, not an A100
  EXPECT_EQ(*est.settings.max_num_batched_tokens, 8192U);
  // Components add up and the KV pool is what the blocks hold.
  const auto& mb = est.per_gpu;
  EXPECT_EQ(mb.total_bytes, mb.weights_bytes + mb.kv_cache_bytes + mb.activation_bytes +
                                mb.cuda_graph_bytes + mb.non_torch_bytes + mb.cuda_context_bytes);
  EXPECT_EQ(est.engine_report.kv_cache_tokens, est.engine_report.num_gpu_blocks * 16);
  EXPECT_EQ(mb.kv_cache_bytes, est.engine_report.num_gpu_blocks * 16 * 131072);
  EXPECT_NEAR(est.engine_report.max_concurrency,
              static_cast<double>(est.engine_report.kv_cache_tokens) / 8192, 0.01);
  ASSERT_FALSE(est.engine_report.log_lines.empty());
}

TEST(Estimate, A100GetsTheSmallBatchDefaults) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "A100-80GB");
  const auto est = plan(in).value();
  EXPECT_EQ(*est.settings.max_num_seqs, 256U);
  EXPECT_EQ(*est.settings.max_num_batched_tokens, 2048U);
}

TEST(Estimate, HigherUtilizationGivesMoreKvTokens) {
  auto in = input("Qwen/Qwen2.5-7B-Instruct", "H100");
  in.settings.gpu_memory_utilization = 0.8;
  const auto low = plan(in).value();
  in.settings.gpu_memory_utilization = 0.95;
  const auto high = plan(in).value();
  const double extra_gib = 0.15 * bytes_to_gib(in.gpu.memory_bytes);
  const double per_token = static_cast<double>(high.kv_bytes_per_token);
  EXPECT_NEAR(
      static_cast<double>(high.engine_report.kv_cache_tokens - low.engine_report.kv_cache_tokens),
      extra_gib * static_cast<double>(k_gib) / per_token, 64.0);
}

TEST(Estimate, SeventyBOnOneSmallGpuDoesNotLoad) {
  auto in = input("meta-llama/Llama-3.1-70B-Instruct", "L4");
  in.workload.context_tokens = {8192};
  in.workload.concurrency = {1, 8};
  const auto est = plan(in).value();
  EXPECT_EQ(est.verdict, Verdict::does_not_start);
  EXPECT_EQ(est.start_failure, "loading weights");
  EXPECT_FALSE(est.warnings.empty());
  // vLLM dies loading the weights: it never logs "Model loading took".
  EXPECT_TRUE(est.engine_report.log_lines.empty());
  // What the workload would need is still known.
  ASSERT_EQ(est.rows.size(), 2U);
  EXPECT_GT(est.rows[0].kv_needed_bytes, 0U);
  EXPECT_EQ(est.rows[1].kv_needed_bytes, 8 * est.rows[0].kv_needed_bytes);
}

TEST(Estimate, MaxModelLenThatDoesNotFitIsReportedWithTheLargestThatDoes) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090");
  in.settings.max_model_len = 131072;
  const auto est = plan(in).value();
  EXPECT_EQ(est.verdict, Verdict::does_not_start);
  EXPECT_EQ(est.start_failure, "KV cache allocation");
  ASSERT_FALSE(est.warnings.empty());
  EXPECT_NE(est.warnings.back().find("largest max_model_len"), std::string::npos);
  // Weights loaded and the profile ran: those lines are printed, the KV size is not.
  ASSERT_EQ(est.engine_report.log_lines.size(), 3U);
  EXPECT_NE(est.engine_report.log_lines[2].find("Available KV cache memory"), std::string::npos);
}

// -q METHOD on an unquantized model prices it as the published checkpoint of that method.
TEST(Estimate, WhatIfQuantizationMatchesThePublishedCheckpoints) {
  const struct {
    const char* base;
    const char* method;
    const char* checkpoint;
  } cases[] = {
      {"meta-llama/Llama-3.1-8B-Instruct", "awq",
       "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"},
      {"meta-llama/Llama-3.1-8B-Instruct", "w4a16",
       "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"},
      {"meta-llama/Llama-3.1-8B-Instruct", "w8a8",
       "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8"},
      {"Qwen/Qwen2.5-7B-Instruct", "gptq", "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4"},
      {"Qwen/Qwen2.5-7B-Instruct", "awq", "Qwen/Qwen2.5-7B-Instruct-AWQ"},
      {"meta-llama/Llama-3.1-8B-Instruct", "bnb-4bit",
       "unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit"},
  };
  for (const auto& c : cases) {
    auto what_if = input(c.base, "H100");
    what_if.settings.quantization = c.method;
    const auto a = plan(what_if);
    ASSERT_TRUE(a) << c.method << ": " << a.error().message;
    const auto b = plan(input(c.checkpoint, "H100")).value();
    const double w_a = bytes_to_gib(a->per_gpu.weights_bytes);
    const double w_b = bytes_to_gib(b.per_gpu.weights_bytes);
    EXPECT_NEAR(w_a, w_b, 0.01 * w_b) << c.base << " -q " << c.method << " vs " << c.checkpoint;
    // (bitsandbytes quantizes at load, as vLLM does with --quantization bitsandbytes.)
    if (std::string_view(c.method) != "bnb-4bit") {
      EXPECT_NE(a->quantization.find("what-if"), std::string::npos) << a->quantization;
    }
  }
  // Embeddings and lm_head stay in bf16: 4-bit Llama 3.1 8B is far above a quarter of 16 GB.
  auto awq = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  awq.settings.quantization = "awq";
  EXPECT_GT(bytes_to_gib(plan(awq)->per_gpu.weights_bytes), 5.0);
}

TEST(Estimate, TensorParallelMustDivideHeads) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.tensor_parallel_size = 3;
  const auto r = plan(in);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_NE(r.error().message.find("num_attention_heads"), std::string::npos);
}

TEST(Estimate, UtilizationOutOfRangeIsUsageError) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.gpu_memory_utilization = 1.5;
  EXPECT_EQ(plan(in).error().kind, ErrorKind::usage);
}

TEST(Estimate, QuantizationFlagContradictingCheckpointIsUsageError) {
  auto in = input("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "H100");
  in.settings.quantization = "awq";  // an AWQ flag on a GPTQ checkpoint
  EXPECT_EQ(plan(in).error().kind, ErrorKind::usage);
  in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.quantization = "mxfp4";  // a dense model has no experts to quantize
  EXPECT_EQ(plan(in).error().kind, ErrorKind::usage);
  in.settings.quantization = "fp8";  // runtime fp8 is fine and halves the linear layers
  const auto fp8 = plan(in).value();
  in.settings.quantization = "";
  const auto bf16 = plan(in).value();
  EXPECT_LT(fp8.per_gpu.weights_bytes, bf16.per_gpu.weights_bytes * 6 / 10);
}

TEST(Estimate, InverseQuestionsAgreeWithRows) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.max_model_len = 32768;
  in.workload.context_tokens = {32768};
  in.workload.concurrency = {1};
  const auto est = plan(in).value();
  const uint64_t n = max_concurrency_at(est, 32768);
  ASSERT_GT(n, 1U);
  EXPECT_LE(est.request_kv_bytes(32768) * n, est.kv_capacity_bytes);
  EXPECT_GT(est.request_kv_bytes(32768) * (n + 1), est.kv_capacity_bytes);
  const uint64_t ctx = max_context_at(est, static_cast<uint32_t>(n), 1 << 20);
  EXPECT_GE(ctx, 32768U);
  EXPECT_LE(est.request_kv_bytes(ctx) * n, est.kv_capacity_bytes);
  EXPECT_GT(est.request_kv_bytes(ctx + 16) * n, est.kv_capacity_bytes);
}

TEST(Estimate, RowsOverCapacityAreFlagged) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.max_model_len = 131072;
  in.workload.context_tokens = {131072};
  in.workload.concurrency = {1, 1000};
  const auto est = plan(in).value();
  ASSERT_EQ(est.rows.size(), 2U);
  EXPECT_EQ(est.rows[0].verdict, Verdict::fits);
  // vLLM queues or preempts what does not fit in its cache; it does not crash.
  EXPECT_EQ(est.rows[1].verdict, Verdict::queues);
  const uint64_t n = est.kv_capacity_bytes / est.request_kv_bytes(131072);
  EXPECT_NE(est.rows[1].note.find(fmt::format("queues above {} concurrent", n)), std::string::npos)
      << est.rows[1].note;
  EXPECT_LT(est.rows[1].margin_bytes, 0);
  EXPECT_EQ(est.rows[1].risk, "critical");
  EXPECT_EQ(est.verdict, Verdict::queues);  // the overall verdict agrees with the rows
}

TEST(Estimate, LongerThanMaxModelLenIsRejected) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100");
  in.settings.max_model_len = 8192;
  in.workload.context_tokens = {4096, 16384};
  in.workload.concurrency = {13};
  const auto est = plan(in).value();
  ASSERT_EQ(est.rows.size(), 2U);
  EXPECT_EQ(est.rows[0].verdict, Verdict::fits);
  EXPECT_EQ(est.rows[1].verdict, Verdict::rejected);
  EXPECT_NE(est.rows[1].note.find("max_model_len 8192"), std::string::npos);
  EXPECT_EQ(est.verdict, Verdict::rejected);
  EXPECT_TRUE(est.start_failure.empty());
}

TEST(Estimate, EnginesWithoutPagingRunOutOfMemoryInsteadOfQueueing) {
  auto in = input("Qwen/Qwen2.5-7B-Instruct", "L4", engines::Engine::hf);
  in.settings.max_model_len = 32768;
  in.workload.context_tokens = {32768};
  in.workload.concurrency = {1, 64};
  const auto est = plan(in).value();
  ASSERT_EQ(est.rows.size(), 2U);
  EXPECT_EQ(est.rows[1].verdict, Verdict::oom);
  EXPECT_EQ(est.verdict, Verdict::oom);
}

TEST(Estimate, TransformersUsesSdpaAndHonoursMaxModelLen) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "H100", engines::Engine::hf);
  in.settings.max_model_len = 32768;
  in.workload.context_tokens = {32768, 65536};
  in.workload.concurrency = {1};
  const auto est = plan(in).value();
  // SDPA holds no 32k x 32k scores: one layer's MLP temporaries and the hidden states around
  // them ((3 x 14336 + 4 x 4096) x 2 bytes for each of 32768 tokens, 3.6 GiB, as an H200
  // measured) are the prefill's peak, not the 1 TiB eager attention would take.
  EXPECT_GT(bytes_to_gib(est.per_gpu.activation_bytes), 3.6);
  EXPECT_LT(bytes_to_gib(est.per_gpu.activation_bytes), 3.7);
  ASSERT_EQ(est.rows.size(), 2U);
  EXPECT_EQ(est.rows[0].verdict, Verdict::fits);
  EXPECT_EQ(est.rows[1].verdict, Verdict::rejected);
}

TEST(Estimate, RecommendFindsSmallestFirst) {
  auto in = input("meta-llama/Llama-3.1-70B-Instruct", "H100");
  in.settings.max_model_len = 8192;
  const auto recs = recommend(in, &plan);
  ASSERT_FALSE(recs.empty());
  for (size_t i = 1; i < recs.size(); ++i) {
    EXPECT_LE(recs[i - 1].gpu_count, recs[i].gpu_count);
    if (recs[i - 1].gpu_count == recs[i].gpu_count) {
      EXPECT_LE(recs[i - 1].gpu.memory_bytes, recs[i].gpu.memory_bytes);
    }
  }
  // Every GPU type that fits is listed, the 48 GB L40S as well as the H100.
  const auto has = [&](std::string_view id) {
    return std::any_of(recs.begin(), recs.end(), [&](const auto& r) { return r.gpu.id == id; });
  };
  EXPECT_TRUE(has("L40S"));
  EXPECT_TRUE(has("H100-SXM"));
  EXPECT_EQ(recommendation_flags(engines::Engine::vllm, 8, 2),
            "--tensor-parallel-size 8 --pipeline-parallel-size 2");
  EXPECT_EQ(recommendation_flags(engines::Engine::sglang, 4, 1), "--tp-size 4");
  for (const auto& r : recs) {
    EXPECT_LE(r.estimate.verdict, Verdict::tight);
    // 70B in bf16 is 131 GiB: no single GPU under 141 GB holds it.
    if (r.gpu_count == 1) {
      EXPECT_GT(r.gpu.memory_bytes, 130 * k_gib);
    }
  }
}

TEST(Estimate, EnginesDifferButAgreeOnWeights) {
  for (const auto engine :
       {engines::Engine::sglang, engines::Engine::trtllm, engines::Engine::hf}) {
    auto in = input("Qwen/Qwen2.5-7B-Instruct", "H100", engine);
    in.settings.max_model_len = 8192;
    const auto est = plan(in).value();
    EXPECT_NEAR(bytes_to_gib(est.per_gpu.weights_bytes), 14.2, 0.1) << engines::engine_name(engine);
    EXPECT_LE(est.verdict, Verdict::tight) << engines::engine_name(engine);
  }
}

TEST(Estimate, SglangDefaultFractionReservesItsFormulaOnH100) {
  // v0.5.3 and later: 512 MiB + 8192 x 1.5 + 256 graphs x 2 + 1/8 GiB = 13,440 MiB.
  auto in = input("Qwen/Qwen2.5-7B-Instruct", "H100", engines::Engine::sglang);
  const auto est = plan(in).value();
  const double reserved =
      (1.0 - *est.settings.gpu_memory_utilization) * bytes_to_gib(in.gpu.memory_bytes);
  EXPECT_NEAR(reserved, 13440.0 / 1024, 0.05);
  EXPECT_EQ(est.engine_report.kv_cache_tokens * est.kv_bytes_per_token, est.per_gpu.kv_cache_bytes);
}

TEST(Estimate, LlamaCppKvIsContextTimesLayers) {
  auto in = input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090", engines::Engine::llamacpp);
  in.settings.max_model_len = 8192;
  const auto est = plan(in).value();
  EXPECT_EQ(est.per_gpu.kv_cache_bytes, 8192ULL * 131072);  // f16 K and V, all layers
  in.settings.kv_cache_dtype = KvCacheDtype::q8_0;
  const auto q8 = plan(in).value();
  EXPECT_EQ(q8.per_gpu.kv_cache_bytes, 8192ULL * 131072 * 34 / 64);
  in.settings.n_gpu_layers = 16;
  const auto half = plan(in).value();
  EXPECT_LT(half.per_gpu.weights_bytes, est.per_gpu.weights_bytes * 6 / 10);
}

// On the CPU, activations are the compute buffer llama.cpp reserves (the line it logs, as bench
// and profile count them); the pages a running server never touches are shown apart, so the parts
// add up to the resident total and overhead may be below zero.
TEST(Estimate, LlamaCppOnTheCpuReservesActivationsAndCountsWhatIsResident) {
  auto in = input("Qwen/Qwen2.5-0.5B-Instruct", "H100", engines::Engine::llamacpp);
  in.gpu = gpu::no_gpu();
  in.settings.no_gpu = true;
  in.settings.host_memory_bytes = 64 * k_gib;
  in.settings.engine_version = "b8121";  // a llama-server that reserves every token's logits
  const auto est = plan(in).value();
  ASSERT_TRUE(est.llamacpp && !est.llamacpp->has_gpu);
  const auto& mb = est.per_gpu;
  const auto& host = *est.llamacpp;
  EXPECT_EQ(mb.activation_bytes, host.host_compute_reserved_bytes);
  EXPECT_EQ(mb.untouched_bytes, host.host_compute_reserved_bytes - host.host_compute_bytes);
  EXPECT_GT(mb.untouched_bytes, 0U);  // a 0.5B model touches far less than the 314 MiB reserved
  EXPECT_EQ(mb.total_bytes, host.host_total_bytes);
  EXPECT_EQ(mb.total_bytes, mb.weights_bytes + mb.kv_cache_bytes + mb.activation_bytes +
                                mb.non_torch_bytes - mb.untouched_bytes);
  EXPECT_EQ(mb.overhead_bytes(),
            static_cast<int64_t>(mb.non_torch_bytes) - static_cast<int64_t>(mb.untouched_bytes));
  EXPECT_LT(mb.overhead_bytes(), 0);
  // The compute buffer line the plan says llama.cpp will log is the activations.
  const auto line = std::ranges::find_if(est.engine_report.log_lines, [](const std::string& l) {
    return l.find("CPU compute buffer size") != std::string::npos;
  });
  ASSERT_NE(line, est.engine_report.log_lines.end());
  EXPECT_NE(line->find(fmt::format("{:.2f} MiB", static_cast<double>(mb.activation_bytes) /
                                                     static_cast<double>(k_mib))),
            std::string::npos)
      << *line;
}

TEST(Estimate, RuntimeDraftLengthControlDoublesGraphSets) {
  auto in = input("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "H100", engines::Engine::trtllm);
  in.settings.num_speculative_tokens = 4;
  const auto always = plan(in).value();
  in.settings.spec_runtime_control = true;
  const auto controlled = plan(in).value();
  EXPECT_EQ(controlled.per_gpu.cuda_graph_bytes, 2 * always.per_gpu.cuda_graph_bytes);
}

TEST(Estimate, DraftModelAddsWeightsAndShrinksKv) {
  auto in = input("meta-llama/Llama-3.1-70B-Instruct", "H100");
  in.settings.tensor_parallel_size = 4;
  in.settings.max_model_len = 8192;
  const auto plain = plan(in).value();
  in.draft = model::catalog_model("meta-llama/Llama-3.2-1B-Instruct").value();
  in.settings.num_speculative_tokens = 4;
  const auto spec = plan(in).value();
  EXPECT_GT(spec.per_gpu.draft_bytes, 0U);
  EXPECT_LT(spec.engine_report.kv_cache_tokens, plain.engine_report.kv_cache_tokens);
}

}  // namespace
}  // namespace kvprof::engines
