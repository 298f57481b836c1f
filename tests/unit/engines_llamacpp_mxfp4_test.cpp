// gpt-oss in llama.cpp, planned from its Hugging Face checkpoint: llama.cpp's converter keeps the
// MXFP4 experts as they are and writes the other matrices in 16 bits (MXFP4_MOE's file type);
// llama-quantize's MXFP4_MOE makes those Q8_0. Checked against the file sizes two public
// llama.cpp logs print for gpt-oss-120b (ggml-org/llama.cpp#15125 and #15253).
#include <gtest/gtest.h>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/planned_lines.hpp"

namespace kvprof::engines {
namespace {

estimate::EstimateInput gpt_oss_on_the_host(const char* quantization) {
  estimate::EstimateInput in;
  in.model = model::catalog_model("openai/gpt-oss-120b").value();
  in.gpu = gpu::find_gpu("RTX-3090").value();
  in.settings.engine = Engine::llamacpp;
  in.settings.quantization = quantization;
  in.settings.n_gpu_layers = 0;  // the whole file in one CPU_Mapped buffer
  in.settings.host_memory_bytes = 256ULL << 30;
  return in;
}

// The weights of the file are its size less its metadata (the tokenizer's 201,088 tokens and
// 446,189 merges: about 12 MiB); print_info rounds the size to 0.01 GiB.
constexpr double k_metadata_mib = 12;

// #15125 (2025-08): "type f32: 433 tensors, type bf16: 146 tensors, type mxfp4: 108 tensors",
// "file size = 60.87 GiB": the experts MXFP4, attention, embeddings and output in bf16.
TEST(LlamaCppMxfp4, GptOssAsConvertedKeepsItsMxfp4Experts) {
  const auto est = plan(gpt_oss_on_the_host("")).value();
  const double mapped = test::planned_mib(est, "CPU_Mapped model buffer size");
  EXPECT_NEAR(mapped, 60.87 * 1024 - k_metadata_mib, 60.87 * 1024 * 0.001) << mapped;
}

// #15253 (b6132, lmstudio-community's file): "type q8_0: 146 tensors, type mxfp4: 108 tensors",
// "file type = MXFP4 MoE", "file size = 59.02 GiB".
TEST(LlamaCppMxfp4, GptOssQuantizedToMxfp4MoeHasQ8_0Matrices) {
  const auto est = plan(gpt_oss_on_the_host("MXFP4_MOE")).value();
  const double mapped = test::planned_mib(est, "CPU_Mapped model buffer size");
  EXPECT_NEAR(mapped, 59.02 * 1024 - k_metadata_mib, 59.02 * 1024 * 0.001) << mapped;
  // An unquantized model's MXFP4_MOE: experts MXFP4, the rest Q8_0 (llama-quantize's mix).
  estimate::EstimateInput qwen = gpt_oss_on_the_host("MXFP4_MOE");
  qwen.model = model::catalog_model("Qwen/Qwen3-30B-A3B").value();
  const auto est_qwen = plan(qwen).value();
  qwen.settings.quantization = "Q8_0";
  const auto q8_0 = plan(qwen).value();
  // Its experts take 17 bytes per 32 weights instead of 34.
  EXPECT_LT(test::planned_mib(est_qwen, "CPU_Mapped model buffer size"),
            0.6 * test::planned_mib(q8_0, "CPU_Mapped model buffer size"));
}

}  // namespace
}  // namespace kvprof::engines
