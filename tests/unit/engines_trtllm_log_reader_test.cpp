// Tests of the TensorRT-LLM log reader on real startup lines quoted in public reports (cited), of
// its PyTorch backend (trtllm-serve) and of its older C++ runtime (Triton's tensorrtllm_backend),
// and on the lines `estimate --engine trtllm` says the engine will print.
#include <gtest/gtest.h>

#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "support/printed_sizes.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::enginelog {
namespace {

using kvprof::test::gib_x100;
using kvprof::test::mib_x100;

// trtllm-serve 1.1.0rc3 starting GPT-OSS 120B on a DGX Spark: a public README holding the whole
// console log (search-index file id 2263047771), lines as printed. The estimation pass runs the
// warm-up and a first KV cache, then the cache that stays is allocated and the warm-up runs again.
const char* const k_trtllm_serve_log =
    "[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3\n"
    "[12/20/2025-04:20:04] [TRT-LLM] [I] Using LLM with PyTorch backend\n"
    "[12/20/2025-04:20:21] [TRT-LLM] [I] Use 63.32 GB for model weights.\n"
    "[TensorRT-LLM][INFO] Number of tokens per block: 32.\n"
    "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache "
    "(8224).\n"
    "[12/20/2025-04:21:10] [TRT-LLM] [I] max_seq_len=8224, max_num_requests=64, "
    "max_num_tokens=8192, max_batch_size=64\n"
    "[12/20/2025-04:21:37] [TRT-LLM] [I] Creating CUDA graph instances for 11 batch sizes.\n"
    "[12/20/2025-04:21:37] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=64, "
    "draft_len=0\n"
    "[12/20/2025-04:21:47] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=56, "
    "draft_len=0\n"
    "[12/20/2025-04:21:49] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=1, "
    "draft_len=0\n"
    "[12/20/2025-04:21:50] [TRT-LLM] [I] Memory used after loading model weights (inside torch) "
    "in memory usage profiling: 63.52 GiB\n"
    "[12/20/2025-04:21:50] [TRT-LLM] [I] Memory used after loading model weights (outside torch) "
    "in memory usage profiling: 49.78 GiB\n"
    "[12/20/2025-04:21:51] [TRT-LLM] [I] Memory dynamically allocated during inference (inside "
    "torch) in memory usage profiling: 0.85 GiB\n"
    "[12/20/2025-04:21:51] [TRT-LLM] [I] Memory used outside torch (e.g., NCCL and CUDA graphs) "
    "in memory usage profiling: 49.28 GiB\n"
    "[12/20/2025-04:21:51] [TRT-LLM] [I] Estimated max memory in KV cache : 5.95 GiB\n"
    "[TensorRT-LLM][INFO] Number of tokens per block: 32.\n"
    "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache "
    "(86720).\n"
    "[12/20/2025-04:21:53] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=64, "
    "draft_len=0\n"
    "[12/20/2025-04:21:53] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=56, "
    "draft_len=0\n"
    "[12/20/2025-04:21:56] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=1, "
    "draft_len=0\n";

TEST(EngineLogTrtllm, PytorchBackendWeightsKvActivationsAndGraphs) {
  const auto r = parse_engine_log(k_trtllm_serve_log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::trtllm);
  ASSERT_TRUE(r.version);
  EXPECT_EQ(r.version->value, "1.1.0rc3");
  ASSERT_EQ(r.figures.size(), 5U);
  EXPECT_EQ(r.figures[0].component, Component::kv_cache);  // the estimation pass's cache
  EXPECT_TRUE(r.figures[0].superseded);
  EXPECT_EQ(r.figures[0].size.bytes, gib_x100(56));
  EXPECT_EQ(r.figures[1].component, Component::weights);
  EXPECT_EQ(r.figures[1].size.bytes, gib_x100(6352));
  EXPECT_EQ(r.figures[1].device, "GPU");
  EXPECT_EQ(r.figures[2].component, Component::activation_peak);
  EXPECT_EQ(r.figures[2].size.bytes, gib_x100(85));
  EXPECT_EQ(r.figures[3].component, Component::non_torch);
  EXPECT_EQ(r.figures[3].size.bytes, gib_x100(4928));
  EXPECT_EQ(r.figures[4].component, Component::kv_cache);  // the cache that stays
  EXPECT_FALSE(r.figures[4].superseded);
  EXPECT_EQ(r.figures[4].size.bytes, gib_x100(595));
  EXPECT_EQ(r.figures[4].size.text, "5.95 GiB");
  ASSERT_TRUE(r.settings.kv_cache_tokens);
  EXPECT_EQ(r.settings.kv_cache_tokens->value, 86720U);
  // Three batch sizes of draft length 0 (each warmed up twice): three graphs.
  ASSERT_TRUE(r.settings.cuda_graphs);
  EXPECT_EQ(r.settings.cuda_graphs->value, 3U);
  ASSERT_EQ(r.graph_captures.size(), 1U);
  EXPECT_EQ(r.graph_captures[0].description, "draft_len=0");
  EXPECT_EQ(r.graph_captures[0].graphs, 3U);
  // Per device, only the cache that stays counts.
  const auto totals = totals_by_device(r);
  ASSERT_EQ(totals.size(), 1U);
  EXPECT_EQ(totals[0].kv_cache_bytes, gib_x100(595));
  EXPECT_EQ(totals[0].weights_bytes, gib_x100(6352));
}

TEST(EngineLogTrtllm, SpeculativeDecodingGraphsPerDraftLength) {
  // The warm-up line's shape with two draft lengths (runtime-controlled speculation captures
  // each batch size for both), rendered from the line above, not quoted.
  std::string log;
  for (const int draft : {4, 0}) {
    for (const int bs : {1, 2, 4}) {
      log += "[TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=" +
             std::to_string(bs) + ", draft_len=" + std::to_string(draft) + "\n";
    }
  }
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::trtllm);
  ASSERT_TRUE(r.settings.cuda_graphs);
  EXPECT_EQ(r.settings.cuda_graphs->value, 6U);
  ASSERT_EQ(r.graph_captures.size(), 2U);
  EXPECT_EQ(r.graph_captures[0].description, "draft_len=4");
  EXPECT_EQ(r.graph_captures[0].graphs, 3U);
  EXPECT_EQ(r.graph_captures[1].description, "draft_len=0");
  EXPECT_EQ(r.graph_captures[1].graphs, 3U);
}

TEST(EngineLogTrtllm, CppRuntimeEngineContextAndKv) {
  const std::string log =
      // https://github.com/triton-inference-server/tensorrtllm_backend/issues/396
      "[TensorRT-LLM][INFO] Loaded engine size: 3404 MiB\n"
      // https://github.com/NVIDIA/TensorRT-LLM/issues/2683
      "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 2265.58 MiB for execution context "
      "memory.\n"
      // https://github.com/triton-inference-server/tensorrtllm_backend/issues/361
      "[TensorRT-LLM][INFO] Allocate 14575206400 bytes for k/v cache. \n"
      "[TensorRT-LLM][INFO] Using 35584 total tokens in paged KV cache, and 32 blocks per "
      "sequence\n"
      // https://github.com/triton-inference-server/tutorials/pull/150
      "[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 65 [window size=2051], tokens per "
      "block=32, primary blocks=116617, secondary blocks=0\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::trtllm);
  EXPECT_EQ(r.n_recognised_lines, 5U);
  ASSERT_EQ(r.figures.size(), 3U);
  EXPECT_EQ(r.figures[0].component, Component::weights);
  EXPECT_EQ(r.figures[0].size.bytes, 3404ULL << 20);
  EXPECT_EQ(r.figures[1].component, Component::compute);
  EXPECT_EQ(r.figures[1].size.bytes, mib_x100(226558));
  EXPECT_EQ(r.figures[2].component, Component::kv_cache);
  EXPECT_EQ(r.figures[2].size.bytes, 14575206400ULL);
  EXPECT_EQ(r.figures[2].size.tolerance_bytes, 0U);
  ASSERT_TRUE(r.settings.kv_cache_tokens);
  EXPECT_EQ(r.settings.kv_cache_tokens->value, 35584U);
  ASSERT_TRUE(r.settings.num_gpu_blocks);
  EXPECT_EQ(r.settings.num_gpu_blocks->value, 116617U);
}

TEST(EngineLogTrtllm, TheLinesTheEstimateSaysTheEngineWillPrintAreRead) {
  const auto est = test::run_kvprof(
      "estimate -m meta-llama/Llama-3.1-8B-Instruct -g H100 --engine trtllm --json");
  ASSERT_EQ(est.rc, 0) << est.out;
  const auto j = test::json_in(est.out);
  ASSERT_FALSE(j.is_discarded()) << est.out;
  std::string log;
  for (const auto& line : j.at("engine_report").at("log_lines"))
    log += "[TRT-LLM] [I] " + line.get<std::string>() + "\n";
  ASSERT_FALSE(log.empty());
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::trtllm);
  EXPECT_EQ(r.n_recognised_lines, j.at("engine_report").at("log_lines").size()) << log;
  ASSERT_EQ(r.figures.size(), 2U);
  EXPECT_EQ(r.figures[0].component, Component::weights);
  EXPECT_EQ(r.figures[1].component, Component::kv_cache);
  ASSERT_TRUE(r.settings.kv_cache_tokens);
  EXPECT_EQ(r.settings.kv_cache_tokens->value,
            j.at("engine_report").at("kv_cache_tokens").get<uint64_t>());
}

}  // namespace
}  // namespace kvprof::enginelog
