// Tests of the vLLM log parser over the 29 real vLLM v0.19 startups of
// tests/fixtures/vllm_startup_public.jsonl: every non-null figure of every record is checked.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"

namespace kvprof::enginelog {
namespace {

const MemoryFigure* find(const EngineLogReport& r, Component c) {
  for (const auto& f : r.figures) {
    if (f.component == c) return &f;
  }
  return nullptr;
}

// The figure equals the record's GiB value within the printed precision.
void expect_gib(const EngineLogReport& r, Component c, const nlohmann::json& gib,
                const std::string& id) {
  if (gib.is_null()) return;
  const auto* f = find(r, c);
  ASSERT_NE(f, nullptr) << id << " " << component_name(c);
  const auto bytes = static_cast<uint64_t>(std::llround(gib.get<double>() * (1ULL << 30)));
  EXPECT_TRUE(f->size.contains(bytes)) << id << " " << component_name(c) << " " << f->size.text;
  EXPECT_EQ(
      f->source.text.find(f->size.text) != std::string::npos ||
          f->source.text.find(f->size.text.substr(0, f->size.text.find(' '))) != std::string::npos,
      true);
}

TEST(EngineLogVllm, EveryRecordEveryFigure) {
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/vllm_startup_public.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto rec = nlohmann::json::parse(line);
    const std::string id = rec.at("id");
    const auto r =
        parse_engine_log(rec.at("quote").get<std::string>(), engines::log_parse_options());
    ++n;
    EXPECT_EQ(r.engine, engines::Engine::vllm) << id;
    expect_gib(r, Component::weights, rec.at("weights_gib"), id);
    expect_gib(r, Component::activation_peak, rec.at("activation_peak_gib"), id);
    expect_gib(r, Component::non_torch, rec.at("non_torch_gib"), id);
    expect_gib(r, Component::kv_cache, rec.at("kv_cache_gib"), id);
    expect_gib(r, Component::cuda_graph, rec.at("cuda_graph_gib"), id);
    expect_gib(r, Component::non_kv_total,
               rec.at("extra").value("total_non_kv_cache_gib", nlohmann::json()), id);
    const auto& s = r.settings;
    if (!rec.at("num_gpu_blocks").is_null()) {
      ASSERT_TRUE(s.num_gpu_blocks) << id;
      EXPECT_EQ(s.num_gpu_blocks->value, rec.at("num_gpu_blocks").get<uint64_t>()) << id;
    }
    if (!rec.at("kv_cache_tokens").is_null()) {
      ASSERT_TRUE(s.kv_cache_tokens) << id;
      EXPECT_EQ(s.kv_cache_tokens->value, rec.at("kv_cache_tokens").get<uint64_t>()) << id;
    }
    if (!rec.at("max_concurrency").is_null()) {
      ASSERT_TRUE(s.max_concurrency) << id;
      EXPECT_NEAR(s.max_concurrency->value, rec.at("max_concurrency").get<double>(), 0.005) << id;
      ASSERT_TRUE(s.concurrency_request_tokens) << id;
      EXPECT_EQ(s.concurrency_request_tokens->value, rec.at("max_model_len").get<uint64_t>()) << id;
    }
    // Weights are printed twice (loading and profiling); one figure per rank.
    int n_weights = 0;
    for (const auto& f : r.figures)
      n_weights += f.component == Component::weights;
    EXPECT_EQ(n_weights, 1) << id;
  }
  EXPECT_EQ(n, 29);
}

TEST(EngineLogVllm, RankDevicesVersionAndOlderWording) {
  const std::string log =
      "(APIServer pid=1) INFO 04-22 15:11:50 [api_server.py:1] vLLM API server version 0.19.0\n"
      "(Worker_TP1 pid=445) INFO 04-22 00:17:32 [v1/worker/gpu_model_runner.py:4820] Model "
      "loading took 33.88 GiB memory and 54.254199 seconds\n"
      // vLLM 0.8-era profiling summary (rendered from vllm/worker/worker.py's format strings)
      "INFO 03-01 10:00:00 worker.py:267] model weights take 14.99GiB; non_torch_memory takes "
      "0.13GiB; PyTorch activation peak memory takes 1.41GiB; the rest of the memory reserved "
      "for KV Cache is 54.75GiB.\n"
      "INFO 03-01 10:00:01 executor_base.py:111] # cuda blocks: 28035, # CPU blocks: 2048\n"
      // a later startup printing the other wording: the first count stays
      "INFO 03-01 10:00:01 executor_base.py:111] # GPU blocks: 30000, # CPU blocks: 2048\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::vllm);
  ASSERT_TRUE(r.version);
  EXPECT_EQ(r.version->value, "0.19.0");
  ASSERT_GE(r.figures.size(), 5U);
  EXPECT_EQ(r.figures[0].device, "TP1");
  EXPECT_EQ(r.figures[1].device, "GPU");
  EXPECT_EQ(r.figures[1].component, Component::weights);
  EXPECT_EQ(r.figures[1].size.text, "14.99GiB");
  EXPECT_NE(find(r, Component::non_torch), nullptr);
  EXPECT_NE(find(r, Component::kv_cache), nullptr);
  ASSERT_TRUE(r.settings.num_gpu_blocks);
  EXPECT_EQ(r.settings.num_gpu_blocks->value, 28035U);
}

// A V0 log without a version line says which modelled release its wording is: the block count's
// wording changed in v0.6.5 ("# GPU blocks" -> "# CUDA blocks"); V0's model runner printed
// "Loading model weights took" until V1's "Model loading took".
TEST(EngineLogVllm, AV0LogWithoutAVersionIsTheReleaseItsWordingBelongsTo) {
  // tests/fixtures/vllm_versions/v0.7.jsonl (oracle-samples/oci-data-science-ai-samples).
  const std::string v07 =
      "INFO 03-25 21:32:47 model_runner.py:1116] Loading model weights took 14.9888 GB\n"
      "INFO 03-25 21:32:48 executor_base.py:108] # CUDA blocks: 2356, # CPU blocks: 2048\n";
  auto r = parse_engine_log(v07, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::vllm);
  ASSERT_TRUE(r.release_from_wording);
  EXPECT_EQ(r.release_from_wording->release, "0.7");
  EXPECT_EQ(r.release_from_wording->source.line_no, 2U);
  ASSERT_TRUE(r.settings.num_gpu_blocks);
  EXPECT_EQ(r.settings.num_gpu_blocks->value, 2356U);
  r = parse_engine_log(
      "INFO 07-19 10:00:05 gpu_executor.py:102] # GPU blocks: 2806, # CPU "
      "blocks: 2048\n",
      engines::log_parse_options(engines::Engine::vllm));
  ASSERT_TRUE(r.release_from_wording);
  EXPECT_EQ(r.release_from_wording->release, "0.6");
  // The weights line alone is a weaker hint, kept until a block line comes.
  r = parse_engine_log(
      "INFO 03-25 21:32:47 model_runner.py:1116] Loading model weights took "
      "14.9888 GB\n",
      engines::log_parse_options(engines::Engine::vllm));
  ASSERT_TRUE(r.release_from_wording);
  EXPECT_EQ(r.release_from_wording->release, "0.7");
  // A V1 log names no V0 release.
  r = parse_engine_log(
      "(EngineCore pid=1) INFO [gpu_worker.py:436] Available KV cache memory: "
      "61.66 GiB\n",
      engines::log_parse_options());
  EXPECT_FALSE(r.release_from_wording);
}

TEST(EngineLogVllm, CudaGraphsCapturedAndEnforceEager) {
  // tqdm bars: updates split by '\r' on one line, two passes, a TP worker printing the same
  // passes again (graphs are per GPU), then an older single-pass wording in another log.
  const std::string log =
      "(APIServer pid=1) INFO 01-01 00:00:00 [utils.py:1] non-default args: {'model': 'm', "
      "'enforce_eager': False}\n"
      "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/51 [00:00<?, "
      "?it/s]\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  49%|####9     | 25/51 "
      "[00:01<00:01, 17.1it/s]\n"
      "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 51/51 "
      "[00:03<00:00, 15.18it/s]\n"
      "Capturing CUDA graphs (decode, FULL): 100%|##########| 35/35 [00:01<00:00, 22.3it/s]\n"
      "(Worker_TP1 pid=4) Capturing CUDA graphs (decode, FULL): 100%|##########| 35/35 [00:01]\n"
      "(EngineCore pid=2) INFO 01-01 00:00:05 [gpu_model_runner.py:1] Graph capturing finished "
      "in 4 secs, took 0.89 GiB\n";
  auto r = parse_engine_log(log, engines::log_parse_options());
  ASSERT_TRUE(r.settings.cuda_graphs);
  EXPECT_EQ(r.settings.cuda_graphs->value, 51U + 35U);
  ASSERT_EQ(r.graph_captures.size(), 2U);
  EXPECT_EQ(r.graph_captures[0].description, "mixed prefill-decode, PIECEWISE");
  ASSERT_TRUE(r.settings.enforce_eager);
  EXPECT_EQ(r.settings.enforce_eager->value, "false");
  EXPECT_NE(find(r, Component::cuda_graph), nullptr);

  r = parse_engine_log(
      "INFO 12-19 22:58:27 model_runner.py:1415] Capturing cudagraphs for decoding.\n"
      "Capturing CUDA graph shapes: 100%|#####| 35/35 [00:13<00:00,  2.51it/s]\n",
      engines::log_parse_options());
  ASSERT_TRUE(r.settings.cuda_graphs);
  EXPECT_EQ(r.settings.cuda_graphs->value, 35U);

  r = parse_engine_log(
      "(APIServer pid=1) INFO 01-01 [utils.py:1] non-default args: {'enforce_eager': True}\n"
      "Capturing CUDA graphs (decode, FULL): broken | 3/x\n",
      engines::log_parse_options());
  EXPECT_FALSE(r.settings.cuda_graphs);
  ASSERT_TRUE(r.settings.enforce_eager);
  EXPECT_EQ(r.settings.enforce_eager->value, "true");

  // SGLang names its batch sizes.
  auto o = engines::log_parse_options(engines::Engine::sglang);
  r = parse_engine_log("[2025-01-01] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]\n", o);
  ASSERT_TRUE(r.settings.cuda_graphs);
  EXPECT_EQ(r.settings.cuda_graphs->value, 7U);
}

}  // namespace
}  // namespace kvprof::enginelog
