// llama.cpp's layer split over several GPUs (-ts, estimate/llamacpp_plan.cpp), by llama.cpp's own
// rule (llama_model::load_tensors, split mode "layer"): the offloaded layers, the output layer
// counted as one more, go to the first GPU whose cumulative share exceeds the layer's position.
// No multi-GPU machine or public log with known settings was at hand, so the rule itself is what
// these tests hold; each GPU's buffers must add up to the totals.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/engines/llamacpp/releases.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::engines {

namespace {

// How many of `split`'s entries equal `gpu`.
size_t count(const std::vector<int32_t>& split, int32_t gpu) {
  return static_cast<size_t>(std::count(split.begin(), split.end(), gpu));
}

TEST(LlamaCppLayerSplit, SharesOfTheOffloadedLayersTheOutputCountedAsOneMore) {
  // 32 layers, all offloaded: 33 places; 3:1 puts positions below 0.75 on the first GPU.
  const auto s = llamacpp_layer_split(32, 33, {3, 1});
  ASSERT_EQ(s.size(), 33U);
  EXPECT_EQ(s[24], 0);  // 24/33 = 0.727
  EXPECT_EQ(s[25], 1);  // 25/33 = 0.758
  EXPECT_EQ(count(s, 0), 25U);
  EXPECT_EQ(count(s, 1), 8U);  // 7 layers and the output
  EXPECT_EQ(s.back(), 1);
  // No -ts: one GPU. All zeros: an even split.
  EXPECT_EQ(llamacpp_layer_split(32, 33, {}), std::vector<int32_t>(33, 0));
  const auto even = llamacpp_layer_split(32, 33, {0, 0});
  EXPECT_EQ(count(even, 0), 17U);
  EXPECT_EQ(count(even, 1), 16U);
  // A GPU with a zero share gets nothing.
  const auto skip = llamacpp_layer_split(32, 33, {1, 0, 1});
  EXPECT_EQ(count(skip, 1), 0U);
  EXPECT_EQ(count(skip, 0) + count(skip, 2), 33U);
}

TEST(LlamaCppLayerSplit, PartialOffloadKeepsTheFirstLayersAndTheOutputOnTheHost) {
  // -ngl 16 of 32: layers 16..31 offloaded, split 1:1 (8 each); the output stays on the host.
  const auto s = llamacpp_layer_split(32, 16, {1, 1});
  for (size_t il = 0; il < 16; ++il)
    EXPECT_EQ(s[il], -1) << il;
  EXPECT_EQ(count(s, 0), 8U);
  EXPECT_EQ(count(s, 1), 8U);
  EXPECT_EQ(s.back(), -1);
  // One GPU: every offloaded layer on it.
  const auto one = llamacpp_layer_split(32, 20, {});
  EXPECT_EQ(count(one, 0), 20U);
  EXPECT_EQ(count(one, -1), 13U);
}

TEST(LlamaCppLayerSplit, EachGpuHoldsItsLayersBuffersAndTheyAddUp) {
  const auto m = *model::catalog_model("llama-3.1-8b");
  LlamaCppSettings s;
  s.has_gpu = true;
  s.n_ctx = 8192;
  s.tensor_split = {3, 1};
  const auto p = plan_llamacpp(m, s).value();
  ASSERT_EQ(p.gpus.size(), 2U);
  EXPECT_EQ(p.gpus[0].layers, 25U);
  EXPECT_EQ(p.gpus[1].layers, 7U);
  EXPECT_TRUE(p.gpus[1].output);
  EXPECT_EQ(p.output_gpu, 1);
  // KV: 32 MiB per layer (8192 cells x 8 KV heads x 128 x 2 (K, V) x 2 bytes).
  EXPECT_EQ(p.gpus[0].kv_bytes, 25 * (32ULL << 20));
  EXPECT_EQ(p.gpus[1].kv_bytes, 7 * (32ULL << 20));
  uint64_t model = 0;
  uint64_t kv = 0;
  uint64_t compute = 0;
  for (const auto& d : p.gpus) {
    model += d.model_bytes;
    kv += d.kv_bytes;
    compute += d.compute_bytes;
  }
  EXPECT_EQ(model, p.model_gpu_bytes);
  EXPECT_EQ(kv, p.kv.gpu_bytes);
  EXPECT_EQ(compute, p.compute.gpu_bytes);
  EXPECT_EQ(p.gpu_total_bytes, model + kv + compute);
  // The same model on one GPU holds the sum.
  s.tensor_split.clear();
  const auto one = plan_llamacpp(m, s).value();
  ASSERT_EQ(one.gpus.size(), 1U);
  EXPECT_EQ(one.model_gpu_bytes, p.model_gpu_bytes);
  EXPECT_EQ(one.kv.gpu_bytes, p.kv.gpu_bytes);
  // A share that is no number is refused.
  s.tensor_split = {1, -1};
  EXPECT_EQ(plan_llamacpp(m, s).error().kind, ErrorKind::usage);
}

TEST(CliLlamaCppTensorSplit, PerGpuFiguresAndLogLinesForEachGpu) {
  const auto r = test::run_kvprof(
      "estimate -m llama-3.1-8b --engine llamacpp -g 4090 -ngl 99 -c 8192 -ts 3,1 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("gpus_total"), 2);
  // The per-GPU breakdown is the busier GPU's: 25 layers of KV.
  EXPECT_EQ(j.at("per_gpu").at("kv_cache_bytes"), 25 * (32ULL << 20));
  std::string lines;
  for (const auto& l : j.at("engine_report").at("log_lines"))
    lines += l.get<std::string>() + "\n";
  EXPECT_NE(lines.find("CUDA1 KV buffer size =   224.00 MiB"), std::string::npos) << lines;
  const auto bad = test::run_kvprof("estimate -m llama-3.1-8b --engine llamacpp -ts 3,x");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("-ts: 'x'"), std::string::npos) << bad.out;
  const auto vllm = test::run_kvprof("estimate -m llama-3.1-8b -ts 1,1");
  EXPECT_EQ(vllm.rc, 2) << vllm.out;
  EXPECT_NE(vllm.out.find("use -tp/-pp"), std::string::npos) << vllm.out;
}

TEST(LlamaCppComputeBuffer, AGpuHoldsTheLogitsOfTheOutputsTheReleaseReserves) {
  // All on one GPU, 4 slots: llama-server before b9460 reserves the logits of every token of the
  // ubatch (512 x 128256 f32, 250.5 MiB, the biggest stage); from b9460 one output per slot.
  const auto m = *model::catalog_model("llama-3.1-8b");
  const auto plan_at = [&m](const char* build, bool per_slot) {
    LlamaCppSettings s;
    s.has_gpu = true;
    s.n_ctx = 8192;
    s.n_seq_max = 4;
    s.outputs_per_slot = per_slot;
    s.release = parse_llamacpp_release(build).value().rules;
    return plan_llamacpp(m, s).value();
  };
  const uint64_t logits_row = uint64_t{m.vocab_size} * 4;
  const auto every_token = plan_at("b9459", true);
  const auto per_slot = plan_at("b9460", true);
  const auto bench = plan_at("b9460", false);  // libllama's own default: every token
  EXPECT_GE(every_token.compute.gpu_bytes, 512 * logits_row);
  EXPECT_EQ(bench.compute.gpu_bytes, every_token.compute.gpu_bytes);
  EXPECT_LT(per_slot.compute.gpu_bytes, 512 * logits_row);
  EXPECT_GE(per_slot.compute.gpu_bytes, 4 * logits_row);
  EXPECT_NE(per_slot.compute_stage, std::string("logits"));
}

}  // namespace
}  // namespace kvprof::engines
