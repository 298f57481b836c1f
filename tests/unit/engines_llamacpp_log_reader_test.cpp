// Tests of the llama.cpp log parser on the two real startup logs (tests/fixtures/llama_cpp_logs)
// and on real lines of newer builds quoted in public issues (each cited where it is used).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/util/units.hpp"
#include "support/printed_sizes.hpp"

namespace kvprof::enginelog {
namespace {

using kvprof::test::mib_x100;

std::string fixture(const std::string& name) {
  return std::string(KVPROF_FIXTURES_DIR) + "/llama_cpp_logs/" + name;
}

EngineLogReport parse_fixture(const std::string& name) {
  auto r = parse_engine_log_file(fixture(name), engines::log_parse_options());
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : EngineLogReport{};
}

const MemoryFigure* find(const EngineLogReport& r, Component c, std::string_view device = "*") {
  for (const auto& f : r.figures) {
    if (f.component == c && (device == "*" || f.device == device)) return &f;
  }
  return nullptr;
}

TEST(EngineLogLlamaCpp, F16LogEveryFigure) {
  const auto r = parse_fixture("startup_f16_np4.log");
  EXPECT_EQ(r.engine, engines::Engine::llamacpp);
  EXPECT_EQ(r.n_lines, 143U);
  EXPECT_EQ(r.n_skipped_long_lines, 0U);
  ASSERT_TRUE(r.version);
  EXPECT_EQ(r.version->value, "0 (unknown)");
  EXPECT_EQ(r.version->source.line_no, 1U);

  ASSERT_EQ(r.figures.size(), 6U);
  const auto* w = find(r, Component::weights, "CPU_Mapped");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->size.bytes, mib_x100(11053));
  EXPECT_EQ(w->size.text, "110.53 MiB");
  EXPECT_EQ(w->size.tolerance_bytes, 5243U);  // 0.005 MiB
  EXPECT_TRUE(w->size.contains(w->size.bytes + 5000));
  EXPECT_FALSE(w->size.contains(w->size.bytes + 6000));
  EXPECT_EQ(w->source.line_no, 93U);
  EXPECT_EQ(w->source.text, "load_tensors:   CPU_Mapped model buffer size =   110.53 MiB");

  const auto* out = find(r, Component::output, "CPU");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->size.bytes, mib_x100(49));
  EXPECT_EQ(out->source.line_no, 107U);

  const auto* kv = find(r, Component::kv_cache, "CPU");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->size.bytes, 64 * k_mib);
  EXPECT_EQ(kv->source.line_no, 108U);

  const auto* k = find(r, Component::kv_cache_k);
  const auto* v = find(r, Component::kv_cache_v);
  ASSERT_NE(k, nullptr);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(k->size.bytes, 32 * k_mib);
  EXPECT_EQ(v->size.bytes, 32 * k_mib);
  EXPECT_EQ(k->cache_type, "f16");
  EXPECT_EQ(v->cache_type, "f16");
  EXPECT_EQ(k->source.line_no, 110U);

  const auto* compute = find(r, Component::compute, "CPU");
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(compute->size.bytes, mib_x100(14801));
  EXPECT_FALSE(compute->superseded);
  EXPECT_EQ(compute->source.line_no, 111U);

  const auto& s = r.settings;
  ASSERT_TRUE(s.n_ctx && s.n_ctx_seq && s.n_seq_max && s.n_batch && s.n_ubatch && s.flash_attn);
  EXPECT_EQ(s.n_seq_max->value, 4U);
  EXPECT_EQ(s.n_ctx->value, 8192U);
  EXPECT_EQ(s.n_ctx->source.line_no, 97U);
  EXPECT_EQ(s.n_ctx_seq->value, 2048U);  // printed as n_ctx_per_seq by this build
  EXPECT_EQ(s.n_ctx_seq->source.line_no, 98U);
  EXPECT_EQ(s.n_batch->value, 2048U);
  EXPECT_EQ(s.n_ubatch->value, 512U);
  EXPECT_EQ(s.flash_attn->value, "0");
  ASSERT_TRUE(s.kv_cells && s.kv_layers && s.kv_seqs && s.type_k && s.type_v && s.n_slots);
  EXPECT_EQ(s.kv_cells->value, 8192U);
  EXPECT_EQ(s.kv_layers->value, 8U);
  EXPECT_EQ(s.kv_seqs->value, "4");
  EXPECT_EQ(s.type_k->value, "f16");
  EXPECT_EQ(s.type_v->value, "f16");
  EXPECT_EQ(s.n_slots->value, 4U);
  EXPECT_FALSE(s.offloaded_layers);  // CPU-only build prints no offload line

  const auto& m = r.model;
  ASSERT_TRUE(m.architecture && m.name && m.block_count && m.embedding_length && m.head_count &&
              m.head_count_kv && m.file_type && m.file_type_name && m.file_size &&
              m.context_length);
  EXPECT_EQ(m.architecture->value, "llama");
  EXPECT_EQ(m.architecture->source.line_no, 13U);
  EXPECT_EQ(m.name->value, "random-llama-8L-512");
  EXPECT_EQ(m.block_count->value, 8U);
  EXPECT_EQ(m.block_count->source.line_no, 17U);
  EXPECT_EQ(m.embedding_length->value, 512U);
  EXPECT_EQ(m.head_count->value, 8U);
  EXPECT_EQ(m.head_count_kv->value, 4U);
  EXPECT_EQ(m.context_length->value, 32768U);
  EXPECT_EQ(m.file_type->value, 1U);
  EXPECT_EQ(m.file_type_name->value, "F16");
  EXPECT_EQ(m.file_size->value.bytes, mib_x100(11053));
  ASSERT_TRUE(m.n_params);
  EXPECT_EQ(m.n_params->value, "57.94 M");

  const auto totals = totals_by_device(r);
  ASSERT_EQ(totals.size(), 2U);
  EXPECT_EQ(totals[0].device, "CPU_Mapped");
  EXPECT_EQ(totals[0].weights_bytes, mib_x100(11053));
  EXPECT_EQ(totals[1].device, "CPU");
  EXPECT_EQ(totals[1].kv_cache_bytes, 64 * k_mib);
  EXPECT_EQ(totals[1].compute_bytes, mib_x100(14801));
  EXPECT_EQ(totals[1].output_bytes, mib_x100(49));
}

TEST(EngineLogLlamaCpp, Q8KvFlashAttnLogEveryFigure) {
  const auto r = parse_fixture("startup_q8kv_fa_np4.log");
  EXPECT_EQ(r.engine, engines::Engine::llamacpp);
  ASSERT_EQ(r.figures.size(), 6U);
  EXPECT_EQ(find(r, Component::weights, "CPU_Mapped")->size.bytes, mib_x100(12638));
  EXPECT_EQ(find(r, Component::output, "CPU")->size.bytes, mib_x100(49));
  EXPECT_EQ(find(r, Component::kv_cache, "CPU")->size.bytes, 204 * k_mib);
  EXPECT_EQ(find(r, Component::kv_cache_k)->size.bytes, 102 * k_mib);
  EXPECT_EQ(find(r, Component::kv_cache_k)->cache_type, "q8_0");
  EXPECT_EQ(find(r, Component::kv_cache_v)->size.bytes, 102 * k_mib);
  EXPECT_EQ(find(r, Component::kv_cache_v)->cache_type, "q8_0");
  EXPECT_EQ(find(r, Component::kv_cache_v)->source.line_no, 111U);
  EXPECT_EQ(find(r, Component::compute, "CPU")->size.bytes, mib_x100(10201));
  const auto& s = r.settings;
  EXPECT_EQ(s.n_ctx->value, 32768U);
  EXPECT_EQ(s.n_ctx_seq->value, 8192U);
  EXPECT_EQ(s.n_seq_max->value, 4U);
  EXPECT_EQ(s.flash_attn->value, "1");
  EXPECT_EQ(s.kv_cells->value, 32768U);
  EXPECT_EQ(s.kv_layers->value, 12U);
  EXPECT_EQ(s.type_k->value, "q8_0");
  EXPECT_EQ(s.type_v->value, "q8_0");
  EXPECT_EQ(r.model.block_count->value, 12U);
  EXPECT_EQ(r.model.embedding_length->value, 768U);
  EXPECT_EQ(r.model.head_count->value, 12U);
  EXPECT_EQ(r.model.head_count_kv->value, 4U);
  EXPECT_EQ(r.model.file_type->value, 7U);
  EXPECT_EQ(r.model.file_type_name->value, "Q8_0");
  EXPECT_EQ(r.model.name->value, "random-llama-12L-768");
}

TEST(EngineLogLlamaCpp, SharedDataCopyMatchesFixture) {
  const std::string shared = std::string(KVPROF_SHARED_DATA_DIR) + "/llama_cpp_logs/";
  for (const char* name : {"startup_f16_np4.log", "startup_q8kv_fa_np4.log"}) {
    std::ifstream a(shared + name);
    if (!a) GTEST_SKIP() << "shared data not present";
    std::ifstream b(fixture(name));
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    EXPECT_EQ(sa.str(), sb.str()) << name;
  }
}

// Newer llama.cpp wording, real lines from public reports.
TEST(EngineLogLlamaCpp, NewerGenerationContextAndKvLines) {
  const std::string log =
      // https://github.com/JamePeng/llama-cpp-python/issues/89 (llama.cpp as of late 2025)
      "load_tensors:   CPU_Mapped model buffer size =  8300.36 MiB\n"
      "llama_context: constructing llama_context\n"
      "llama_context: n_seq_max     = 1\n"
      "llama_context: n_ctx         = 4096\n"
      "llama_context: n_ctx_seq     = 4096\n"
      "llama_context: n_batch       = 2048\n"
      "llama_context: n_ubatch      = 512\n"
      "llama_context: causal_attn   = 1\n"
      "llama_context: flash_attn    = auto\n"
      "llama_context: kv_unified    = false\n"
      "llama_context: n_ctx_seq (4096) < n_ctx_train (262144) -- the full capacity of the model "
      "will not be utilized\n"
      "llama_context:        CPU  output buffer size =     0.58 MiB\n"
      "llama_kv_cache: layer   0: dev = CPU\n"
      // https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/1454
      " llama_kv_cache:        CPU KV buffer size = 78080.00 MiB\n"
      " llama_kv_cache: size = 78080.00 MiB ( 16384 cells,  61 layers,  1/1 seqs), K (f16): "
      "46848.00 MiB, V (f16): 31232.00 MiB\n"
      // https://github.com/ggml-org/llama.cpp/issues/20490
      "load_tensors: offloaded 0/49 layers to GPU\n"
      // https://github.com/ggml-org/llama.cpp/issues/21730
      "graph_reserve: reserving a graph for ubatch with n_tokens =  512, n_seqs =  1, n_outputs "
      "=  512\n"
      "sched_reserve:      CUDA0 compute buffer size =  1366.07 MiB\n"
      "sched_reserve:      CUDA1 compute buffer size =   636.07 MiB\n"
      "sched_reserve:      CUDA2 compute buffer size =   632.07 MiB\n"
      "sched_reserve:      CUDA3 compute buffer size =  5223.02 MiB\n"
      "sched_reserve:  CUDA_Host compute buffer size =  1063.09 MiB\n"
      "sched_reserve: graph nodes  = 1867\n"
      "sched_reserve: graph splits = 6\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::llamacpp);
  const auto& s = r.settings;
  EXPECT_EQ(s.n_ctx_seq->value, 4096U);
  EXPECT_EQ(s.n_ctx_seq->source.text, "llama_context: n_ctx_seq     = 4096");
  EXPECT_EQ(s.flash_attn->value, "auto");
  EXPECT_EQ(s.kv_unified->value, "false");
  EXPECT_EQ(s.kv_seqs->value, "1/1");
  EXPECT_EQ(s.kv_cells->value, 16384U);
  EXPECT_EQ(s.kv_layers->value, 61U);
  EXPECT_EQ(s.offloaded_layers->value, 0U);
  EXPECT_EQ(s.offloadable_layers->value, 49U);
  EXPECT_EQ(find(r, Component::kv_cache, "CPU")->size.bytes, 78080 * k_mib);
  EXPECT_EQ(find(r, Component::kv_cache_k)->size.bytes, 46848 * k_mib);
  EXPECT_EQ(find(r, Component::kv_cache_v)->size.bytes, 31232 * k_mib);
  EXPECT_EQ(find(r, Component::output, "CPU")->size.bytes, mib_x100(58));
  EXPECT_EQ(find(r, Component::compute, "CUDA3")->size.bytes, mib_x100(522302));
  EXPECT_EQ(find(r, Component::compute, "CUDA_Host")->size.bytes, mib_x100(106309));
  EXPECT_EQ(find(r, Component::compute, "CUDA_Host")->source.line_no, 22U);
}

TEST(EngineLogLlamaCpp, TimestampAnsiAndJournaldPrefixes) {
  const std::string log =
      // https://github.com/ggml-org/llama.cpp/issues/27680 (--log-colors --log-timestamps)
      "\x1b[34m1.14.608.918\x1b[0m \x1b[32mI \x1b[0mllama_context:  CUDA_Host  output buffer size "
      "=     0.49 MiB\n"
      "\x1b[34m1.14.610.021\x1b[0m \x1b[32mI \x1b[0mllama_kv_cache:      CUDA0 KV buffer size =   "
      "182.75 MiB\n"
      // https://github.com/gpustack/gpustack/issues/1681
      "0.00.167.171 I print_info: file size   = 8.37 GiB (4.87 BPW) \n"
      "0.00.447.726 I print_info: n_layer          = 48\n"
      // https://github.com/ollama/ollama/pull/6279
      "Sep 11 01:16:15 lena ollama[1884]: llm_load_print_meta: model params     = 70.55 B\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  const auto* out = find(r, Component::output, "CUDA_Host");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->source.text.find('\x1b'), std::string::npos);
  EXPECT_EQ(find(r, Component::kv_cache, "CUDA0")->size.bytes, mib_x100(18275));
  ASSERT_TRUE(r.model.file_size);
  EXPECT_EQ(r.model.file_size->value.bytes, ((837ULL << 30) + 50) / 100);
  EXPECT_EQ(r.model.file_size->value.tolerance_bytes, (1ULL << 30) / 200 + 1);
  EXPECT_EQ(r.model.block_count->value, 48U);
  ASSERT_TRUE(r.model.n_params);
  EXPECT_EQ(r.model.n_params->value, "70.55 B");
}

TEST(EngineLogLlamaCpp, ReReservedComputeBuffersSupersedeEarlierOnes) {
  // https://github.com/Anbeeld/beellama.cpp/issues/7 (a llama.cpp fork; same format strings)
  const std::string log =
      "2.11.005.504 I sched_reserve:      CUDA1 compute buffer size =   144.64 MiB\n"
      "2.11.005.505 I sched_reserve:  CUDA_Host compute buffer size =    11.54 MiB\n"
      "2.11.005.506 I sched_reserve: graph nodes  = 209\n"
      "2.11.005.506 I sched_reserve: graph splits = 5\n"
      "2.12.071.817 I sched_reserve: reserving ...\n"
      "2.12.086.615 I sched_reserve:      CUDA0 compute buffer size =    46.79 MiB\n"
      "2.12.086.620 I sched_reserve:      CUDA1 compute buffer size =   146.41 MiB\n"
      "2.12.086.621 I sched_reserve:  CUDA_Host compute buffer size =    17.82 MiB\n"
      "2.12.086.621 I sched_reserve: graph nodes  = 209\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  ASSERT_EQ(r.figures.size(), 5U);
  EXPECT_TRUE(r.figures[0].superseded);
  EXPECT_TRUE(r.figures[1].superseded);
  EXPECT_FALSE(r.figures[2].superseded);
  const auto totals = totals_by_device(r);
  ASSERT_EQ(totals.size(), 3U);
  EXPECT_EQ(totals[0].device, "CUDA0");
  EXPECT_EQ(totals[1].compute_bytes, mib_x100(14641));
  EXPECT_EQ(totals[2].compute_bytes, mib_x100(1782));
}

TEST(EngineLogLlamaCpp, SecondContextAddsItsOwnBuffers) {
  // A draft model's context: its compute buffers add to the target's, never replace them.
  // Lines rendered from the format strings of src/llama-context.cpp.
  const std::string log =
      "llama_context: constructing llama_context\n"
      "sched_reserve:      CUDA0 compute buffer size =   300.00 MiB\n"
      "sched_reserve: graph nodes  = 100\n"
      "llama_context: constructing llama_context\n"
      "llama_kv_cache:      CUDA0 KV buffer size =    80.00 MiB\n"
      "sched_reserve:      CUDA0 compute buffer size =   100.00 MiB\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  ASSERT_EQ(r.figures.size(), 3U);
  EXPECT_EQ(r.figures[2].context, 1U);
  EXPECT_FALSE(r.figures[0].superseded);
  const auto totals = totals_by_device(r);
  ASSERT_EQ(totals.size(), 1U);
  EXPECT_EQ(totals[0].compute_bytes, 400 * k_mib);
}

TEST(EngineLogLlamaCpp, RepackAndOldGenerationBuffers) {
  const std::string log =
      // rendered from "%s: %12s model buffer size = %8.2f MiB" (src/llama-model.cpp)
      "load_tensors:   CPU_REPACK model buffer size =  2685.02 MiB\n"
      // https://github.com/Thireus/GGUF-Tool-Suite/issues/30 (llm_load_tensors, 2024 builds)
      "llm_load_tensors:        CPU buffer size =  3024.00 MiB\n"
      // https://github.com/ikawrakow/ik_llama.cpp/pull/237 (llama_new_context_with_model era)
      "llama_new_context_with_model: n_ctx      = 163840\n"
      "llama_new_context_with_model: flash_attn = 0\n"
      "llama_new_context_with_model:  CUDA_Host compute buffer size =   174.02 MiB\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  ASSERT_EQ(r.figures.size(), 3U);
  EXPECT_EQ(r.figures[0].device, "CPU_REPACK");
  EXPECT_EQ(r.figures[0].component, Component::weights);
  EXPECT_EQ(r.figures[1].device, "CPU");
  EXPECT_EQ(r.figures[1].component, Component::weights);
  EXPECT_EQ(r.figures[1].size.bytes, 3024 * k_mib);
  EXPECT_EQ(r.figures[2].component, Component::compute);
  EXPECT_EQ(r.settings.n_ctx->value, 163840U);
  EXPECT_EQ(r.settings.flash_attn->value, "0");
}

TEST(EngineLogLlamaCpp, MemoryBreakdownTableWithWrappedUnaccounted) {
  const std::string log =
      // https://github.com/ggml-org/llama.cpp/issues/19437
      "llama_memory_breakdown_print: | memory breakdown [MiB]  | total   free     self   model   "
      "context   compute       unaccounted |\n"
      "llama_memory_breakdown_print: |   - CUDA0 (GTX 1080 Ti) | 11165 = 8702 + (10001 =  9814 + "
      "    134 +      51) + 17592186036877 |\n"
      "llama_memory_breakdown_print: |   - Host                |                   197 =   166 + "
      "      0 +      30                   |\n"
      "llama_params_fit_impl: context size reduced from 262144 to 30000 -> need 6257 MiB less "
      "memory in total\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::llamacpp);
  ASSERT_EQ(r.breakdown.size(), 2U);
  const auto& gpu = r.breakdown[0];
  EXPECT_EQ(gpu.device, "CUDA0");
  EXPECT_EQ(gpu.description, "GTX 1080 Ti");
  EXPECT_EQ(*gpu.total_bytes, 11165 * k_mib);
  EXPECT_EQ(*gpu.free_bytes, 8702 * k_mib);
  EXPECT_EQ(gpu.self_bytes, 10001 * k_mib);
  EXPECT_EQ(gpu.model_bytes, 9814 * k_mib);
  EXPECT_EQ(gpu.context_bytes, 134 * k_mib);
  EXPECT_EQ(gpu.compute_bytes, 51 * k_mib);
  EXPECT_EQ(*gpu.unaccounted_bytes, -7539LL * static_cast<int64_t>(k_mib));  // 11165-8702-10001
  EXPECT_EQ(gpu.source.line_no, 2U);
  const auto& host = r.breakdown[1];
  EXPECT_EQ(host.device, "Host");
  EXPECT_FALSE(host.total_bytes);
  EXPECT_EQ(host.self_bytes, 197 * k_mib);
  EXPECT_EQ(host.model_bytes, 166 * k_mib);
  EXPECT_EQ(host.compute_bytes, 30 * k_mib);
}

TEST(EngineLogLlamaCpp, LastBreakdownTableWinsAndOldFormatReads) {
  const std::string log =
      // https://github.com/ggml-org/llama.cpp/pull/15860 (first version of the breakdown)
      "llama_print_memory_breakdown: memory breakdown:      total   free     self   model   "
      "context   compute    unaccounted\n"
      "llama_print_memory_breakdown:   - CUDA0 (RTX 4090):  24080 = 9436 + (14193 = 13169 +      "
      "38 +     985) +         451\n"
      "llama_print_memory_breakdown:   - CPU (EPYC 7742):  515628              72 =     0 +      "
      "57 "
      "+      15\n"
      "main: something else\n"
      // the exit table of a later run: https://github.com/ggml-org/llama.cpp/issues/19437
      "common_memory_breakdown_print: | memory breakdown [MiB] | total free self model context "
      "compute unaccounted |\n"
      "common_memory_breakdown_print: |   - Host                |                   197 =   166 "
      "+       0 +      30                   |\n";
  const auto first =
      parse_engine_log(log.substr(0, log.find("main:")), engines::log_parse_options());
  ASSERT_EQ(first.breakdown.size(), 2U);
  EXPECT_EQ(*first.breakdown[0].unaccounted_bytes, 451LL * static_cast<int64_t>(k_mib));
  EXPECT_EQ(*first.breakdown[1].total_bytes, 515628 * k_mib);
  EXPECT_EQ(first.breakdown[1].self_bytes, 72 * k_mib);
  const auto r = parse_engine_log(log, engines::log_parse_options());
  ASSERT_EQ(r.breakdown.size(), 1U);
  EXPECT_EQ(r.breakdown[0].device, "Host");
}

TEST(EngineLogLlamaCpp, StreamingInAnyChunksGivesTheSameReport) {
  std::ifstream in(fixture("startup_q8kv_fa_np4.log"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const auto whole = parse_engine_log(text, engines::log_parse_options());
  for (size_t chunk : {1UL, 7UL, 100UL, 4096UL}) {
    EngineLogParser p(engines::log_parse_options());
    for (size_t i = 0; i < text.size(); i += chunk)
      p.feed(std::string_view(text).substr(i, chunk));
    const auto r = p.finish();
    ASSERT_EQ(r.figures.size(), whole.figures.size()) << chunk;
    for (size_t i = 0; i < r.figures.size(); ++i) {
      EXPECT_EQ(r.figures[i].size.bytes, whole.figures[i].size.bytes);
      EXPECT_EQ(r.figures[i].source.line_no, whole.figures[i].source.line_no);
    }
    EXPECT_EQ(r.n_lines, whole.n_lines);
  }
}

}  // namespace
}  // namespace kvprof::enginelog
