// Reading a server command into the deployment it starts (engines::read_launch_command).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kvprof/engines/llamacpp/tensor_overrides.hpp"
#include "kvprof/engines/registry.hpp"

namespace kvprof::engines {
namespace {

TEST(LaunchCommand, LlamaServerFlagsAsLlamaCppReadsThem) {
  const auto r = read_launch_command(
      "CUDA_VISIBLE_DEVICES=0 /opt/llama/bin/llama-server -m /models/q.gguf -c 8192 -np 4 "
      "-ngl 20 -fa off -ctk q8_0 --cache-type-v=q8_0 -ub 256 -b 1024 --no-mmap --port 8080");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->program, "llama-server");
  EXPECT_EQ(r->model, "/models/q.gguf");
  const auto& s = r->settings;
  EXPECT_EQ(s.engine, Engine::llamacpp);
  EXPECT_EQ(s.max_model_len, 8192U);
  EXPECT_EQ(s.n_parallel, 4U);
  EXPECT_FALSE(s.kv_unified);  // -np 4 without -kvu: each slot holds 8192 / 4 cells
  EXPECT_EQ(s.n_gpu_layers, 20U);
  EXPECT_FALSE(s.flash_attn);
  EXPECT_EQ(s.cache_type_k, "q8_0");
  EXPECT_EQ(s.cache_type_v, "q8_0");
  EXPECT_EQ(s.n_ubatch, 256U);
  EXPECT_EQ(s.n_batch, 1024U);
  EXPECT_FALSE(s.use_mmap);
}

TEST(LaunchCommand, LlamaServerLeftAtOneSlotRunsFourSharingOneCache) {
  for (const char* cmd : {"llama-server -m m.gguf", "llama-server -m m.gguf -np 1"}) {
    const auto r = read_launch_command(cmd);
    ASSERT_TRUE(r.has_value()) << cmd;
    EXPECT_EQ(r->settings.n_parallel, 4U) << cmd;
    EXPECT_TRUE(r->settings.kv_unified) << cmd;
    // The newest llama-server starts with the model's own context, which --fit lowers.
    EXPECT_FALSE(r->settings.max_model_len.has_value()) << cmd;
    EXPECT_TRUE(r->settings.ctx_of_model) << cmd;
    EXPECT_EQ(r->settings.fit, true) << cmd;
    EXPECT_FALSE(r->notes.empty());
  }
  const auto kept = read_launch_command("llama-server -m m.gguf -kvu -np 2 -fa");
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->settings.n_parallel, 2U);
  EXPECT_TRUE(kept->settings.kv_unified);
  EXPECT_TRUE(kept->settings.flash_attn);  // a bare -fa is on
}

// The server's release decides its defaults: one slot before b6925, the model's own context from
// b7407 (said, as --fit is not planned).
TEST(LaunchCommand, TheServersReleaseDecidesItsSlotsAndItsContext) {
  estimate::EngineSettings base;
  base.engine_version = "b5640";
  const auto old = read_launch_command("llama-server -m m.gguf", base);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->settings.n_parallel, 1U);
  EXPECT_FALSE(old->settings.kv_unified);
  base.engine_version = "b7000";
  const auto late_2025 = read_launch_command("llama-server -m m.gguf", base);
  ASSERT_TRUE(late_2025.has_value());
  EXPECT_EQ(late_2025->settings.n_parallel, 4U);
  EXPECT_NE(late_2025->notes.back().find("from b6925"), std::string::npos);
  std::string notes;
  for (const auto& n : late_2025->notes)
    notes += n + "\n";
  EXPECT_NE(notes.find("planned with 4096 cells, llama-server's default"), std::string::npos)
      << notes;
  base.engine_version = "b8121";
  const auto newer = read_launch_command("llama-server -m m.gguf", base);
  ASSERT_TRUE(newer.has_value());
  EXPECT_NE(newer->notes.front().find("model's own context (from b7407)"), std::string::npos)
      << newer->notes.front();
}

TEST(LaunchCommand, KvprofServeSlotsAsLlamaServerGivenNp) {
  const auto r = read_launch_command(
      "cd /tmp && exec ./build/src/kvprof serve -m tiny.gguf --ctx-size 2048 --parallel 3 "
      "--port {port}");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->program, "kvprof serve");
  EXPECT_EQ(r->model, "tiny.gguf");
  EXPECT_EQ(r->settings.max_model_len, 2048U);
  EXPECT_EQ(r->settings.n_parallel, 3U);
  EXPECT_FALSE(r->settings.kv_unified);  // each slot holds 2048 / 3 cells
  const auto shared = read_launch_command("kvprof serve -m t.gguf -c 2048 -np 3 --kv-unified");
  ASSERT_TRUE(shared.has_value());
  EXPECT_TRUE(shared->settings.kv_unified);
  // Left at one slot, kvprof serve keeps one (llama-server would run four).
  const auto one = read_launch_command("kvprof serve -m t.gguf");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->settings.n_parallel, 1U);
}

TEST(LaunchCommand, VllmAndSglangServers) {
  estimate::EngineSettings base;
  base.gpu_memory_utilization = 0.8;
  const auto v = read_launch_command(
      "vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --max-model-len 32k "
      "--kv-cache-dtype fp8 --port 8000",
      base);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->settings.engine, Engine::vllm);
  EXPECT_EQ(v->model, "Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(v->settings.tensor_parallel_size, 2U);
  EXPECT_EQ(v->settings.max_model_len, 32000U);
  EXPECT_EQ(v->settings.gpu_memory_utilization, 0.8);  // from base: the command does not say
  const auto s = read_launch_command(
      "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp 4 "
      "--mem-fraction-static 0.85 --context-length 8192");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->settings.engine, Engine::sglang);
  EXPECT_EQ(s->model, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(s->settings.tensor_parallel_size, 4U);
  EXPECT_EQ(s->settings.gpu_memory_utilization, 0.85);
  // Both engines' flags are recorded as given by kvprof estimate's names, the same for both.
  EXPECT_EQ(s->given, (std::set<std::string>{"tensor-parallel-size", "gpu-memory-utilization",
                                             "max-model-len"}));
  EXPECT_TRUE(v->given.contains("kv-cache-dtype"));
  // A value that does not read as its setting leaves the setting (and "given") as it was.
  const auto bad = read_launch_command(
      "vllm serve m --max-num-seqs lots --block-size 0 --dtype auto --enforce-eager");
  ASSERT_TRUE(bad.has_value());
  EXPECT_FALSE(bad->settings.max_num_seqs.has_value());
  EXPECT_FALSE(bad->settings.block_size.has_value());
  EXPECT_FALSE(bad->settings.dtype.has_value());
  EXPECT_TRUE(bad->settings.enforce_eager);
  EXPECT_EQ(bad->given, std::set<std::string>{"enforce-eager"});
}

TEST(LaunchCommand, NoneForOtherProgramsAndBrokenCommands) {
  EXPECT_FALSE(read_launch_command("python3 my_server.py --port 8000").has_value());
  EXPECT_FALSE(read_launch_command("llama-server -m 'unclosed").has_value());
  EXPECT_FALSE(read_launch_command("").has_value());
  // -c 0 is the model's own context (0, as the plan reads it), said in a note.
  const auto zero = read_launch_command("llama-server -m m.gguf -c 0 -np 2");
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->settings.max_model_len, 0U);
  EXPECT_NE(zero->notes.front().find("-c 0"), std::string::npos) << zero->notes.front();
  // A bad number is left at the default (the model's context on the newest release), with a note.
  const auto r = read_launch_command("llama-server -m m.gguf -c lots");
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->settings.ctx_of_model);
  EXPECT_GE(r->notes.size(), 2U);
  // -fit off, -fitt and -fitc as llama-server reads them.
  const auto fit = read_launch_command("llama-server -m m.gguf -fit off -fitt 2048,512 -fitc 8192");
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->settings.fit, false);
  EXPECT_EQ(fit->settings.fit_target_bytes, 2048ULL << 20);
  EXPECT_EQ(fit->settings.fit_ctx, 8192U);
}

// -dev as llama-server reads it: "none" keeps everything on the host; several GPUs share the
// layers.
TEST(LaunchCommand, DevicesDecideWhereLlamaCppOffloads) {
  const auto none = read_launch_command("llama-server -m m.gguf -c 4096 -dev none");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->settings.no_gpu);
  const auto two = read_launch_command("llama-server -m m.gguf -c 4096 --device CUDA0,CUDA1");
  ASSERT_TRUE(two.has_value());
  // Two GPUs, split as llama.cpp splits by their free memory (evenly): not a -ts the user gave,
  // which --fit would leave alone.
  EXPECT_EQ(two->settings.n_devices, 2U);
  EXPECT_TRUE(two->settings.tensor_split.empty());
  const auto split = read_launch_command("llama-server -m m.gguf -dev CUDA0,CUDA1 -ts 3,1");
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->settings.tensor_split, (std::vector<double>{3.0, 1.0}));
  const auto bad = read_launch_command("llama-server -m m.gguf -dev Vulkan0");
  ASSERT_TRUE(bad.has_value());
  EXPECT_FALSE(bad->settings.no_gpu);
  EXPECT_NE(bad->notes.front().find("'Vulkan0' is not a GPU"), std::string::npos)
      << bad->notes.front();
  EXPECT_FALSE(parse_device_list("CUDA0,CUDA0").has_value());
  EXPECT_EQ(parse_device_list(" none ").value().size(), 0U);
}

}  // namespace
}  // namespace kvprof::engines
