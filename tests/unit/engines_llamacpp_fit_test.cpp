// llama.cpp's --fit, planned: the context it lowers when -c is not given, the layers and MoE
// experts it moves when -ngl and the overrides are not given, and what it leaves alone when they
// are; the lines it logs and what llama-fit-params prints.
#include <gtest/gtest.h>

#include <string>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/llama_fit_plan.hpp"
#include "support/planned_lines.hpp"

namespace kvprof::engines {
namespace {

// tools/fit-params/README.md of b7416 (#16653): Qwen3-30B-A3B in f16 on one RTX 4090 logs
// "context size reduced from 40960 to 4096 -> need 3456 MiB less memory in total", then fills
// the GPU with dense-only layers converted to full ones front to back ("48 layers (34
// overflowing)"; -ngl counts the output layer only from b7475). kvprof's context step is the same
// to the MiB. On the card's whole memory kvprof keeps 17 full layers; the README's machine had
// less free: its last line says 19187 MiB used and 1199 free, 20386 MiB measured after llama.cpp's
// CUDA context existed. Given that (plus the 300 MiB context kvprof counts), kvprof keeps the same
// 14 full layers.
TEST(LlamaCppFit, TheMoeExampleOfLlamaCppsReadme) {
  auto in = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b7416");
  const auto est = plan(in).value();
  ASSERT_TRUE(est.llamacpp.has_value());
  const auto& l = *est.llamacpp;
  EXPECT_TRUE(test::fit_logged(est,
                               "llama_params_fit_impl: context size reduced from 40960 to 4096 -> "
                               "need 3456 MiB less memory in total"));
  EXPECT_TRUE(test::fit_logged(est, "cannot fulfill margin of 1024 MiB"));
  EXPECT_TRUE(
      test::fit_logged(est, "with only dense weights in device memory there is a total surplus"));
  EXPECT_TRUE(
      test::fit_logged(est, "- CUDA0 (NVIDIA GeForce RTX 4090): 48 layers (31 overflowing)"));
  EXPECT_TRUE(l.fit_success);
  EXPECT_TRUE(l.fit_args.starts_with("-c 4096 -ngl 48 -ot \"blk\\.17\\.")) << l.fit_args;
  // b7416's pattern has no gate_up (from b8497).
  EXPECT_NE(l.fit_args.find("ffn_(up|down|gate)_(ch|)exps=CPU"), std::string::npos);
  EXPECT_EQ(est.settings.max_model_len, 4096U);
  // What it chose leaves the target free, and the plan of it is what the table shows.
  EXPECT_LE(est.per_gpu.total_bytes, in.gpu.memory_bytes - (1ULL << 30));
}

TEST(LlamaCppFit, TheMoeExampleWithTheFreeMemoryItMeasured) {
  auto in = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b7416");
  in.gpu.memory_bytes = (20386ULL + 300) << 20;
  const auto est = plan(in).value();
  ASSERT_TRUE(est.llamacpp.has_value());
  // As the README prints it: "- CUDA0 (NVIDIA GeForce RTX 4090): 48 layers (34 overflowing)".
  EXPECT_TRUE(
      test::fit_logged(est, "- CUDA0 (NVIDIA GeForce RTX 4090): 48 layers (34 overflowing),  "));
  EXPECT_TRUE(est.llamacpp->fit_args.starts_with("-c 4096 -ngl 48 -ot \"blk\\.14\\."))
      << est.llamacpp->fit_args;
}

// From b7475 -ngl counts the output layer and llama.cpp's partial (overflowing) layers take the
// highest indices of the device's range, the output layer's among them (its patterns match
// nothing): the same 14 full layers and 34 layers of host experts print as "49 layers (35
// overflowing)".
TEST(LlamaCppFit, TheOutputLayerCountsAmongTheOverflowingFromB7475) {
  auto in = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b9410");
  in.gpu.memory_bytes = (20386ULL + 300) << 20;
  const auto est = plan(in).value();
  EXPECT_TRUE(
      test::fit_logged(est, "- CUDA0 (NVIDIA GeForce RTX 4090): 49 layers (35 overflowing),  "));
  EXPECT_TRUE(est.llamacpp->fit_args.starts_with("-c 4096 -ngl 49 -ot \"blk\\.14\\."))
      << est.llamacpp->fit_args;
}

// Where not even the dense weights fit (a "deficit"), llama.cpp fills dense-only layers from the
// back. From b7650 (#18494) its search counts the output as the one layer kept whole, but the
// slot kept whole is the lowest of the device's layers: that layer keeps its experts on the GPU,
// so fewer layers fit (common/fit.cpp, set_ngl_tensor_split_tbo). Qwen3-235B-A22B Q4_K_M on a
// 6 GiB GPU (5120 MiB to fill): 56 layers, every one dense-only, at b7649; 29 at b7650, layer 66
// whole. The Q4_K_M mix gives some layers Q6_K tensors, so the memory does not grow with the
// count (53 layers 4967 MiB, 54 5214, 55 5065, 56 5113, 57 5360): llama.cpp's false-position
// search, whose steps kvprof takes as it does, ends at 56 where halving the range ends at 53.
TEST(LlamaCppFit, WithADeficitTheLowestLayerIsKeptWholeFromB7650) {
  const auto fitted = [](const char* build) {
    auto in = test::llama_fit_input("Qwen/Qwen3-235B-A22B", "RTX-4090", build);
    in.gpu.memory_bytes = 6ULL << 30;
    in.settings.quantization = "Q4_K_M";
    in.settings.host_memory_bytes = 512ULL << 30;
    return plan(in).value();
  };
  const auto before = fitted("b7649");
  EXPECT_TRUE(test::fit_logged(before, "there is still a total deficit"));
  EXPECT_TRUE(before.llamacpp->fit_args.starts_with("-c 4096 -ngl 56 -ot \"blk\\.39\\."))
      << before.llamacpp->fit_args;
  EXPECT_TRUE(before.llamacpp->fit_success);
  const auto after = fitted("b7650");
  EXPECT_TRUE(after.llamacpp->fit_args.starts_with("-c 4096 -ngl 29 -ot \"blk\\.67\\."))
      << after.llamacpp->fit_args;
  EXPECT_TRUE(test::fit_logged(after,
                               "- CUDA0 (NVIDIA GeForce RTX 4090): 29 layers,   5100 MiB used,   "
                               "1043 MiB free"));
  // Before the output layer counted (b7475), the same search: 82 dense-only layers, the output
  // layer's 500 MiB left on the host.
  EXPECT_TRUE(fitted("b7416").llamacpp->fit_args.starts_with("-c 4096 -ngl 82 -ot \"blk\\.12\\."));
}

// The README's example predates the fit's release (b6895): from b7407 llama.cpp then tries to
// keep part of the first overflowing layer on the device — its up experts, then its gate experts
// too — and, where not even the up experts fit, sends that layer's whole FFN to the host (the
// router with it). Which part stays follows the memory left over.
TEST(LlamaCppFit, PartOfOneMoreLayerStaysOnTheDeviceAsTheMemoryAllows) {
  const auto fitted = [](uint64_t extra_mib, const char* build) {
    auto in = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", build);
    in.gpu.memory_bytes = (20386ULL + 300 + extra_mib) << 20;
    return plan(in).value().llamacpp->fit_args;
  };
  // ~200 MiB over the target: one layer's up experts (384 MiB in f16) do not fit.
  auto args = fitted(0, "b7416");
  EXPECT_NE(
      args.find(
          "\"blk\\.14\\.ffn_(up|gate|down).*=CPU,blk\\.15\\.ffn_(up|down|gate)_(ch|)exps=CPU"),
      std::string::npos)
      << args;
  args = fitted(500, "b7416");  // the up experts fit, not the gate experts as well
  EXPECT_NE(args.find("\"blk\\.14\\.ffn_(gate|down).*=CPU,blk\\.15\\."), std::string::npos) << args;
  args = fitted(900, "b7416");  // both, not yet the whole layer (1152 MiB of experts)
  EXPECT_NE(args.find("\"blk\\.14\\.ffn_down.*=CPU,blk\\.15\\."), std::string::npos) << args;
  // From b8497 the patterns name gate_up too.
  args = fitted(500, "b9410");
  EXPECT_NE(args.find("\\.ffn_(gate|gate_up|down).*=CPU,"), std::string::npos) << args;
}

// The same README runs llama-server with what the fit printed (-c 4096 -ngl 48 and the experts of
// layers 14-47 on the host) and ends with llama.cpp's memory breakdown: CUDA0 17904 MiB of model,
// 384 of context, 898 of compute; the host 58259 of model (the whole file mapped: the token
// embeddings lead it, the output layer and the host experts trail it) and 12 of compute. The
// compute figures are op offload's: the output layer stays on the host at -ngl 48 before b7475,
// and its product for the 512 tokens of a prompt batch runs on the GPU, the 593.5 MiB f16 matrix
// copied into the compute buffer next to the 512 x 151,936 logits.
TEST(LlamaCppFit, TheReadmesBreakdownOfTheFittedSettingsWithOpOffload) {
  auto in = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b7416");
  in.settings.fit = false;
  in.settings.max_model_len = 4096;
  in.settings.n_gpu_layers = 48;
  for (int il = 14; il < 48; ++il) {
    in.settings.tensor_overrides.push_back(
        {"blk\\." + std::to_string(il) + "\\.ffn_(up|down|gate)_(ch|)exps", "CPU"});
  }
  const auto est = plan(in).value();
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 model buffer size"), 17904, 17904 * 0.01);
  EXPECT_NEAR(test::planned_mib(est, "CPU_Mapped model buffer size"), 58259, 58259 * 0.01);
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 KV buffer size"), 384, 0.5);
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 compute buffer size"), 898, 898 * 0.02);
  EXPECT_LT(test::planned_mib(est, "CPU compute buffer size"), 16);
  // --no-op-offload: the logits are the host's again and the GPU keeps its own stages.
  in.settings.op_offload = false;
  const auto off = plan(in).value();
  EXPECT_LT(test::planned_mib(off, "CUDA0 compute buffer size"), 400);
  EXPECT_GT(test::planned_mib(off, "CPU compute buffer size"), 290);
}

TEST(LlamaCppFit, ADenseModelKeepsTheLargestContextThenTheMostLayers) {
  // Llama 3.1 8B in bf16 (15 GiB) on a 24 GB card: the context alone makes it fit.
  auto in = test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090", "b8121");
  const auto est = plan(in).value();
  const uint64_t ctx = *est.settings.max_model_len;
  EXPECT_GT(ctx, 4096U);
  EXPECT_LT(ctx, 131072U);
  EXPECT_EQ(ctx % 256, 0U);
  EXPECT_TRUE(test::fit_logged(est, "entire model can be fit by reducing context"));
  EXPECT_EQ(est.llamacpp->fit_args, "-c " + std::to_string(ctx) + " -ngl -1");
  // 256 cells more would not have met the target.
  auto more = in;
  more.settings.fit = false;
  more.settings.max_model_len = ctx + 1024;
  EXPECT_GT(plan(more).value().per_gpu.total_bytes, in.gpu.memory_bytes - (1ULL << 30));
  // On a 12 GB card the weights do not fit at 4096 cells: as many layers as fit.
  auto small = test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4070-TI", "b8121");
  const auto layers = plan(small).value();
  EXPECT_EQ(layers.settings.max_model_len, 4096U);
  ASSERT_TRUE(layers.settings.n_gpu_layers.has_value());
  EXPECT_LT(*layers.settings.n_gpu_layers, 33U);
  EXPECT_TRUE(test::fit_logged(layers, "filling dense layers back-to-front:"));
  EXPECT_LE(layers.per_gpu.total_bytes, small.gpu.memory_bytes - (1ULL << 30));
  auto one_more = small;
  one_more.settings.fit = false;
  one_more.settings.max_model_len = 4096;
  one_more.settings.n_gpu_layers = *layers.settings.n_gpu_layers + 1;
  EXPECT_GT(plan(one_more).value().per_gpu.total_bytes, small.gpu.memory_bytes - (1ULL << 30));
}

TEST(LlamaCppFit, WhatTheUserGaveIsLeftAlone) {
  auto in = test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4070-TI", "b8121");
  in.settings.n_gpu_layers = 99;
  const auto est = plan(in).value();
  // The context is still lowered, then llama.cpp gives up and loads it as it is.
  EXPECT_EQ(est.settings.max_model_len, 4096U);
  EXPECT_FALSE(est.llamacpp->fit_success);
  EXPECT_TRUE(test::fit_logged(est, "n_gpu_layers already set by user to 99, abort"));
  // A -c given is never lowered; -c 0 is the whole context, not lowered from b7826 on.
  in.settings.n_gpu_layers.reset();
  in.settings.max_model_len = 16384;
  EXPECT_EQ(plan(in).value().settings.max_model_len, 16384U);
  in.settings.max_model_len = 0;
  EXPECT_EQ(plan(in).value().settings.max_model_len, 131072U);
  // A release without --fit plans the flags as given, and says so.
  auto old = test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4070-TI", "b5640");
  const auto old_est = plan(old).value();
  EXPECT_TRUE(old_est.llamacpp->fit_args.empty());
  ASSERT_FALSE(old_est.warnings.empty());
  bool said = false;
  for (const auto& w : old_est.warnings)
    said = said || w.find("--fit: llama.cpp b5640 has none") != std::string::npos;
  EXPECT_TRUE(said);
}

// From b8840 a CPU-only llama.cpp fits the context to the host's RAM.
TEST(LlamaCppFit, OnTheCpuTheContextFitsTheHostsMemory) {
  auto in = test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "H100", "v0.5.0");
  in.settings.no_gpu = true;
  in.settings.host_memory_bytes = 24ULL << 30;
  const auto est = plan(in).value();
  EXPECT_LT(*est.settings.max_model_len, 131072U);
  EXPECT_TRUE(test::fit_logged(est, "of host memory"));
  EXPECT_LE(est.llamacpp->host_total_bytes, (24ULL << 30) - (1ULL << 30));
}

// A llama-server command of the newest release fits by default, as the server does.
TEST(LlamaCppFit, ALaunchedServerFitsByDefault) {
  const auto r = read_launch_command("llama-server -m /models/llama-3.1-8b.gguf");
  ASSERT_TRUE(r.has_value());
  estimate::EstimateInput in;
  in.model = model::catalog_model("meta-llama/Llama-3.1-8B-Instruct").value();
  in.gpu = gpu::find_gpu("RTX-4090").value();
  in.settings = r->settings;
  in.settings.host_memory_bytes = 256ULL << 30;
  const auto est = plan(in).value();
  EXPECT_FALSE(est.llamacpp->fit_args.empty());
  EXPECT_LT(*est.settings.max_model_len, 131072U);
  auto off = read_launch_command("llama-server -m /models/llama-3.1-8b.gguf -fit off");
  in.settings = off->settings;
  in.settings.host_memory_bytes = 256ULL << 30;
  const auto whole = plan(in).value();
  EXPECT_TRUE(whole.llamacpp->fit_args.empty());
  EXPECT_EQ(whole.settings.max_model_len, 131072U);  // the model's own context, as the server
}

}  // namespace
}  // namespace kvprof::engines
