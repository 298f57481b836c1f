// Ollama planned: its defaults per release, the llama.cpp it bundles, its own estimate and log
// lines, checked against two public startups whose logs hold both Ollama's estimate and the
// buffers llama.cpp then allocated (tests/fixtures/ollama_logs/README.md cites them).
#include <gtest/gtest.h>

#include <string>

#include "kvprof/engines/ollama/ollama.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/planned_lines.hpp"

namespace kvprof::engines {
namespace {

estimate::EstimateInput ollama_input(const char* model, const char* gpu, const char* release) {
  estimate::EstimateInput in;
  in.model = model::catalog_model(model).value();
  in.gpu = gpu::find_gpu(gpu).value();
  in.settings.engine = Engine::ollama;
  in.settings.engine_version = release;
  in.settings.flash_attn_auto = true;
  in.settings.host_memory_bytes = 64ULL << 30;
  return in;
}

// Builds before b3569 named the weights' buffer by its device alone ("CUDA0 buffer size").
double planned_weights_mib(const estimate::Estimate& e) {
  const double model = test::planned_mib(e, "CUDA0 model buffer size");
  return model >= 0 ? model : test::planned_mib(e, "CUDA0 buffer size");
}

bool has_note(const estimate::Estimate& e, const std::string& part) {
  for (const auto& n : e.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

// log-01: Ollama v0.3.9 (llama.cpp b3535) on a Tesla T4, llama3.1:8b (Q4_0), its defaults:
// num_ctx 2048 x 4 slots. Ollama logged memory.required.full="6.2 GiB" kv="1.0 GiB" graph.full
// "560.0 MiB" graph.partial "677.5 MiB" weights.total "4.7 GiB" (its layers' cache included),
// started `--ctx-size 8192 --batch-size 512 --n-gpu-layers 33 --parallel 4`; llama.cpp then
// allocated CUDA0 4156.00 MiB of model, 1024.00 of KV, 560.00 of compute.
TEST(OllamaPlan, APublicT4StartupOfVersion039) {
  auto in = ollama_input("meta-llama/Llama-3.1-8B-Instruct", "T4", "v0.3.9");
  in.settings.quantization = "Q4_0";
  const auto est = plan(in).value();
  EXPECT_EQ(est.settings.engine, Engine::ollama);
  EXPECT_EQ(est.settings.engine_version, "v0.3.9");
  EXPECT_TRUE(test::has_planned_line(est,
                                     "msg=\"offload to cuda\" layers.requested=-1 layers.model=33 "
                                     "layers.offload=33"));
  EXPECT_TRUE(test::has_planned_line(est, "memory.required.full=\"6.2 GiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.required.kv=\"1.0 GiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.weights.total=\"4.7 GiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.weights.repeating=\"4.3 GiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.weights.nonrepeating=\"411.0 MiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.graph.full=\"560.0 MiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.graph.partial=\"677.5 MiB\""));
  EXPECT_TRUE(test::has_planned_line(
      est, "--ctx-size 8192 --batch-size 512 --n-gpu-layers 33 --parallel 4"));
  EXPECT_NEAR(planned_weights_mib(est), 4156.00, 4156 * 0.01);
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 KV buffer size"), 1024.00, 0.01);
  // The GPU compute buffer is planned from the graph's stages: 572.01 MiB, 2.1% over.
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 compute buffer size"), 560.00, 560 * 0.025);
  EXPECT_TRUE(has_note(est, "`ollama ps` shows SIZE 6.7 GB and 100% GPU")) << est.notes[0];
}

// log-02: Ollama v0.5.4 (llama.cpp b4327, the Go runner: a batch of 512 per slot) on an RTX
// 4090, a Llama 3.1 8B Q4_K_M: memory.required.full="6.5 GiB", weights.total "4.9 GiB"; llama.cpp
// allocated CUDA0 4403.49 MiB of model, 1024.00 of KV, 560.00 of compute with n_batch 2048.
TEST(OllamaPlan, APublicRtx4090StartupOfVersion054) {
  auto in = ollama_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090", "0.5.4");
  in.settings.quantization = "Q4_K_M";
  const auto est = plan(in).value();
  EXPECT_TRUE(
      test::has_planned_line(est, "memory.gpu_overhead=\"0 B\" memory.required.full=\"6.5 GiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.weights.total=\"4.9 GiB\""));
  EXPECT_TRUE(test::has_planned_line(est, "memory.graph.full=\"560.0 MiB\""));
  EXPECT_TRUE(
      test::has_planned_line(est,
                             "ollama runner --model <blob> --ctx-size 8192 --batch-size 512 "
                             "--n-gpu-layers 33 --parallel 4"));
  EXPECT_NEAR(planned_weights_mib(est), 4403.49, 4403.49 * 0.01);
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 KV buffer size"), 1024.00, 0.01);
  // The GPU compute buffer is planned from the graph's stages: 572.01 MiB, 2.1% over.
  EXPECT_NEAR(test::planned_mib(est, "CUDA0 compute buffer size"), 560.00, 560 * 0.025);
  EXPECT_EQ(est.settings.n_batch, 2048U);
}

// OLLAMA_GPU_OVERHEAD (v0.3.10 on) is kept free beside every figure of Ollama's placement: 20 GiB
// of a 4090's 24 leave room for part of the model, and its line says so.
TEST(OllamaPlan, TheGpuOverheadIsKeptFreeWhereTheReleaseHasIt) {
  auto in = ollama_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090", "0.5.4");
  in.settings.quantization = "Q4_K_M";
  in.settings.ollama_gpu_overhead_bytes = 20ULL << 30;
  const auto est = plan(in).value();
  EXPECT_TRUE(test::has_planned_line(est, "memory.gpu_overhead=\"20.0 GiB\"")) << [&] {
    std::string all;
    for (const auto& l : est.engine_report.log_lines)
      all += l + "\n";
    return all;
  }();
  EXPECT_FALSE(test::has_planned_line(est, "layers.offload=33"));
  EXPECT_TRUE(test::has_planned_line(est, "layers.model=33 layers.offload="));
  EXPECT_LT(test::planned_mib(est, "CUDA0 model buffer size"), 4403.49 * 0.6);
  // Releases without it, and those whose llama-server fits the layers, say it is not applied.
  for (const char* release : {"v0.3.9", "v0.30.0"}) {
    in.settings.engine_version = release;
    const auto other = plan(in).value();
    bool warned = false;
    for (const auto& w : other.warnings)
      warned = warned || w.starts_with("OLLAMA_GPU_OVERHEAD:");
    EXPECT_TRUE(warned) << release;
  }
}

TEST(OllamaPlan, EachReleasesDefaults) {
  // v0.6.7: num_ctx 4096 and two slots where the model fits whole.
  auto in = ollama_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090", "v0.6.7");
  auto est = plan(in).value();
  EXPECT_EQ(est.settings.max_model_len, 8192U);
  EXPECT_EQ(est.settings.n_parallel, 2U);
  EXPECT_TRUE(has_note(est, "num_ctx 4096 x 2 slots")) << est.notes[0];
  // v0.10.0: one slot.
  in.settings.engine_version = "v0.10.0";
  est = plan(in).value();
  EXPECT_EQ(est.settings.n_parallel, 1U);
  // v0.15.5: the context by the GPU's memory (32k on 24 GB).
  in.settings.engine_version = "v0.15.5";
  est = plan(in).value();
  EXPECT_EQ(est.settings.max_model_len, 32768U);
  // A slot count given is kept, and num_ctx is per slot.
  in.settings.n_parallel = 3;
  in.settings.n_parallel_given = true;
  in.settings.max_model_len = 1000;
  est = plan(in).value();
  EXPECT_EQ(est.settings.max_model_len, 3000U);
}

TEST(OllamaPlan, FlashAttentionAndTheKvCacheType) {
  // Before v0.12.4 flash attention is off unless asked for, so a quantized cache is not applied.
  auto in = ollama_input("Qwen/Qwen3-8B", "RTX-4090", "v0.12.3");
  in.settings.cache_type_k = "q8_0";
  auto est = plan(in).value();
  EXPECT_FALSE(est.settings.flash_attn);
  bool warned = false;
  for (const auto& w : est.warnings)
    warned = warned || w.find("only with flash attention") != std::string::npos;
  EXPECT_TRUE(warned);
  // v0.12.4 turns it on for Qwen3 by default, and the q8_0 cache follows.
  in.settings.engine_version = "v0.12.4";
  est = plan(in).value();
  EXPECT_TRUE(est.settings.flash_attn);
  EXPECT_EQ(est.settings.cache_type_k, "q8_0");
}

TEST(OllamaPlan, LlamaServerReleasesFitTheLayersThemselves) {
  auto in = ollama_input("meta-llama/Llama-3.1-8B-Instruct", "RTX-4090", "v0.30.0");
  const auto est = plan(in).value();
  EXPECT_TRUE(test::has_planned_line(est, "msg=\"starting llama-server\""));
  EXPECT_TRUE(has_note(est, "llama-server's --fit places the layers"));
}

TEST(OllamaReleases, EachNamesItsBundledLlamaCpp) {
  EXPECT_EQ(parse_ollama_release("0.5.4").value().llamacpp_build, 4327U);
  EXPECT_EQ(parse_ollama_release("v0.3.9").value().llamacpp_build, 3535U);
  EXPECT_EQ(parse_ollama_release("v0.24.0").value().llamacpp_build, 7437U);
  EXPECT_EQ(parse_ollama_release("").value().name(), "v0.32.15");
  EXPECT_EQ(parse_ollama_release("v0.33.0-rc2").value().llamacpp_build, 10488U);
  EXPECT_FALSE(parse_ollama_release("v0.1.44").has_value());
  EXPECT_FALSE(parse_ollama_release("banana").has_value());
}

}  // namespace
}  // namespace kvprof::engines
