// llama.cpp's --fit over several GPUs (-dev CUDA0,CUDA1 and no -ts), and where a MoE model's
// surplus is smaller than one layer's experts, planned as common/fit.cpp does it: each GPU filled
// from the last with as many layers as its target allows, a MoE model's dense-only layers then
// made full ones from the first GPU on, one more layer's part overflowing to the next GPU; the
// lines it logs and the -ts that llama-fit-params prints.
#include <gtest/gtest.h>

#include <string>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/llama_fit_plan.hpp"
#include "support/planned_lines.hpp"

namespace kvprof::engines {
namespace {

// The position of the first fit line holding `part` (npos when none does).
size_t line_at(const estimate::Estimate& e, const std::string& part) {
  const auto& lines = e.llamacpp->fit_lines;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(part) != std::string::npos) return i;
  }
  return std::string::npos;
}

const uint64_t k_target_mib = 1024;

// Llama 3.1 70B in Q4_K_M (40 GiB) on two RTX 4090s: the context is lowered for both GPUs
// together ("should be fit across devices"), then the last GPU takes as many layers as leave its
// target free and the first the rest. llama-fit-params prints the split it chose as -ts.
TEST(LlamaCppFitGpus, ADenseModelFillsTheLastGpuFirst) {
  const auto in =
      test::llama_fit_input("meta-llama/Llama-3.1-70B-Instruct", "RTX-4090", "b9410", 2);
  auto q4 = in;
  q4.settings.quantization = "Q4_K_M";
  const auto est = plan(q4).value();
  ASSERT_TRUE(est.llamacpp.has_value());
  EXPECT_TRUE(test::fit_logged(est, "projected memory use with initial parameters [MiB]:"));
  EXPECT_TRUE(test::fit_logged(est, "  - CUDA1 (NVIDIA GeForce RTX 4090):  24207 total,"));
  EXPECT_TRUE(test::fit_logged(est, "free vs. target of   1024"));
  EXPECT_TRUE(test::fit_logged(est, "cannot meet free memory targets on all devices, need to use"));
  EXPECT_TRUE(
      test::fit_logged(est, "entire model should be fit across devices by reducing context"));
  const size_t cuda1 = line_at(est, "  - CUDA1 (NVIDIA GeForce RTX 4090): 41 layers");
  const size_t cuda0 = line_at(est, "  - CUDA0 (NVIDIA GeForce RTX 4090): 40 layers");
  ASSERT_NE(cuda1, std::string::npos);
  ASSERT_NE(cuda0, std::string::npos);
  EXPECT_LT(cuda1, cuda0) << "the last GPU is filled first";
  const std::string ctx = std::to_string(*est.settings.max_model_len);
  EXPECT_EQ(est.llamacpp->fit_args, "-c " + ctx + " -ngl 81 -ts 40,41");
  EXPECT_EQ(est.settings.tensor_split, (std::vector<double>{40, 41}));
  // One more layer on the last GPU would not have left its target free.
  auto more = q4;
  more.settings.fit = false;
  more.settings.n_devices = 0;
  more.settings.max_model_len = *est.settings.max_model_len;
  more.settings.n_gpu_layers = 42;
  more.settings.tensor_split = {0, 42};
  const auto over = plan(more).value();
  EXPECT_GT(test::planned_mib(over, "CUDA1 model buffer size") +
                test::planned_mib(over, "CUDA1 KV buffer size") +
                test::planned_mib(over, "CUDA1 compute buffer size") + 300,
            24207.0 - k_target_mib);
  // Its context is below what one GPU of twice the memory would take: the half layer each GPU
  // is expected to waste is kept back.
  auto one = test::llama_fit_input("meta-llama/Llama-3.1-70B-Instruct", "RTX-4090", "b9410", 0);
  one.settings.quantization = "Q4_K_M";
  one.gpu.memory_bytes = 2 * in.gpu.memory_bytes;
  EXPECT_LT(*est.settings.max_model_len, *plan(one).value().settings.max_model_len);
}

// Qwen3-30B-A3B in f16 (61 GB) on two RTX 4090s: the dense weights of every layer fit on the
// last GPU with room to spare, so dense-only layers become full ones from the first GPU on; the
// first GPU's one more layer keeps its attention, up and gate experts and sends its down experts
// to the next GPU (-ot ...=CUDA1), as common/fit.cpp's overflow does.
TEST(LlamaCppFitGpus, AMoeModelOverflowsToTheNextGpu) {
  const auto est =
      plan(test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b9410", 2)).value();
  ASSERT_TRUE(est.llamacpp.has_value());
  EXPECT_TRUE(
      test::fit_logged(est, "with only dense weights in device memory there is a total surplus"));
  EXPECT_TRUE(test::fit_logged(est, "  - CUDA1 (NVIDIA GeForce RTX 4090): 49 layers,"));
  EXPECT_TRUE(test::fit_logged(est, "  - CUDA0 (NVIDIA GeForce RTX 4090):  0 layers,"));
  EXPECT_TRUE(test::fit_logged(est,
                               "converting dense-only layers to full layers and filling them "
                               "front-to-back with overflow to next device/system memory:"));
  EXPECT_TRUE(
      test::fit_logged(est, "  - CUDA0 (NVIDIA GeForce RTX 4090): 19 layers ( 1 overflowing),"));
  EXPECT_TRUE(
      test::fit_logged(est, "  - CUDA1 (NVIDIA GeForce RTX 4090): 30 layers (13 overflowing),"));
  const std::string& args = est.llamacpp->fit_args;
  EXPECT_TRUE(args.starts_with("-c 4096 -ngl 49 -ts 19,30 -ot \"blk\\.18\\.ffn_down.*=CUDA1,"))
      << args;
  // Layers 36-47 and the output layer's slot overflow to the host.
  EXPECT_NE(args.find(",blk\\.36\\.ffn_(gate|gate_up|down).*=CPU,"), std::string::npos) << args;
  EXPECT_NE(args.find("blk\\.48\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU\""), std::string::npos)
      << args;
  // The plan places layer 18's down experts on the second GPU, and both GPUs keep their target.
  bool placed = false;
  for (const auto& l : est.llamacpp->override_lines)
    placed = placed || (l.find("blk.18.ffn_down_exps.weight") != std::string::npos &&
                        l.ends_with("overridden to CUDA1"));
  EXPECT_TRUE(placed);
  EXPECT_TRUE(est.llamacpp->fit_success);
  // The plan per GPU (`--json`: llamacpp.gpus), each within its target.
  const auto& gpus = est.llamacpp->gpus;
  ASSERT_EQ(gpus.size(), 2U);
  EXPECT_EQ(gpus[0].device, "CUDA0");
  EXPECT_EQ(gpus[0].layers, 19U);
  EXPECT_FALSE(gpus[0].output);
  EXPECT_EQ(gpus[1].layers, 29U);  // and the output layer: the 30 of -ts
  EXPECT_TRUE(gpus[1].output);
  for (const auto& g : gpus) {
    EXPECT_EQ(g.total_bytes, g.model_bytes + g.kv_bytes + g.compute_bytes + (300ULL << 20));
    EXPECT_LE(g.total_bytes + (k_target_mib << 20), g.budget_bytes) << g.device;
  }
  for (const char* gpu : {"CUDA0", "CUDA1"}) {
    const double used = test::planned_mib(est, std::string(gpu) + " model buffer size") +
                        test::planned_mib(est, std::string(gpu) + " KV buffer size") +
                        test::planned_mib(est, std::string(gpu) + " compute buffer size") + 300;
    EXPECT_LE(used, 24207.0 - k_target_mib) << gpu;
  }
}

TEST(LlamaCppFitGpus, WhatFitsAsGivenOrWasGivenIsLeftAlone) {
  const auto fits =
      plan(test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "H100", "b9410", 2));
  EXPECT_TRUE(test::fit_logged(
      *fits, "targets for free memory can be met on all devices, no changes needed"));
  EXPECT_EQ(fits->llamacpp->fit_args, "-c 131072 -ngl -1");
  // Before b7672 (#18679) the targets were one margin and the line said so.
  const auto older =
      plan(test::llama_fit_input("meta-llama/Llama-3.1-8B-Instruct", "H100", "b7650", 2));
  EXPECT_TRUE(test::fit_logged(*older, "will leave at least"));
  EXPECT_TRUE(test::fit_logged(*older, "MiB of free memory on all devices, no changes needed"));
  // -ts over several GPUs is the user's split: llama.cpp lowers the context and stops there.
  auto split = test::llama_fit_input("meta-llama/Llama-3.1-70B-Instruct", "RTX-4090", "b9410", 2);
  split.settings.quantization = "Q4_K_M";
  split.settings.tensor_split = {1, 1};
  const auto given = plan(split).value();
  EXPECT_TRUE(test::fit_logged(given, "model_params::tensor_split already set by user, abort"));
  EXPECT_FALSE(given.llamacpp->fit_success);
  // A release before b7650 fitted the last GPU's layers otherwise: the plan says whose rules.
  const auto b7620 =
      plan(test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b7620", 2)).value();
  bool warned = false;
  for (const auto& w : b7620.warnings)
    warned = warned || w.find("--fit over several GPUs: planned as llama.cpp b7650") == 0;
  EXPECT_TRUE(warned);
}

// From b7650 the candidates of the dense-only fill keep the lowest layer whole, its experts on
// the GPU. Where the dense weights leave less than one layer's experts spare (Qwen3-30B-A3B f16:
// 1152 MiB a layer), no candidate of all 49 layers fits, and llama.cpp ends with fewer layers on
// the GPU than `--cpu-moe -ngl 99` would hold: 10 with 500 MiB spare, 21 with 1000, all 49 with
// 1300 (the first dense-only layer then sends its router to the host too, as it still fits).
TEST(LlamaCppFitGpus, ASurplusSmallerThanALayersExpertsKeepsFewerLayers) {
  auto dense_only = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b9410", 0);
  dense_only.settings.fit = false;
  dense_only.settings.max_model_len = 4096;
  dense_only.settings.tensor_overrides = {{"blk\\.\\d+\\.ffn_(up|down|gate)_exps", "CPU"}};
  const uint64_t need = plan(dense_only).value().per_gpu.total_bytes;
  const auto fitted = [&](uint64_t spare_mib) {
    auto in = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b9410", 0);
    in.gpu.memory_bytes = need + ((k_target_mib + spare_mib) << 20);
    return plan(in).value();
  };
  const auto small = fitted(500);
  EXPECT_TRUE(test::fit_logged(small, "there is a total surplus of 500 MiB"));
  EXPECT_TRUE(test::fit_logged(small, "  - CUDA0 (NVIDIA GeForce RTX 4090): 10 layers,"));
  EXPECT_TRUE(small.llamacpp->fit_args.starts_with(
      "-c 4096 -ngl 10 -ot \"blk\\.40\\.ffn_(gate|up|gate_up|down).*=CPU,blk\\.41\\."))
      << small.llamacpp->fit_args;
  EXPECT_TRUE(small.llamacpp->fit_success);
  EXPECT_TRUE(fitted(1000).llamacpp->fit_args.starts_with("-c 4096 -ngl 21 "));
  const auto enough = fitted(1300);
  EXPECT_TRUE(enough.llamacpp->fit_args.starts_with(
      "-c 4096 -ngl 49 -ot \"blk\\.1\\.ffn_(gate|up|gate_up|down).*=CPU,blk\\.2\\."))
      << enough.llamacpp->fit_args;
  // Before b7650 no candidate kept a layer whole, but the search interpolated towards all 49
  // layers with one whole (its high end) and ended at 35 dense-only layers: below 49 the output
  // layer stays on the host and op offload copies its 593.5 MiB matrix into the GPU's compute
  // buffer, so 36 layers need 2 MiB more than the 500 spare.
  auto b7649 = test::llama_fit_input("Qwen/Qwen3-30B-A3B", "RTX-4090", "b7649", 0);
  b7649.gpu.memory_bytes = need + ((k_target_mib + 500) << 20);
  const auto before = plan(b7649).value();
  EXPECT_TRUE(before.llamacpp->fit_args.starts_with("-c 4096 -ngl 35 -ot \"blk\\.14\\."))
      << before.llamacpp->fit_args;
  EXPECT_TRUE(test::fit_logged(before, "35 layers (35 overflowing)"));
}

}  // namespace
}  // namespace kvprof::engines
