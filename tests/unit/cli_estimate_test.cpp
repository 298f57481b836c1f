// Black-box tests of the kvprof binary's planning commands: exit codes, one-line errors, JSON.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/gpu/gpu_catalog.hpp"
#include "support/run_kvprof.hpp"

namespace {

using kvprof::test::Run;
using kvprof::test::run_kvprof;

TEST(CliEstimate, DefaultRunPrintsTableAndVerdict) {
  const auto r = run_kvprof("estimate");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("meta-llama/Llama-3.1-8B-Instruct"), std::string::npos);
  EXPECT_NE(r.out.find("GPU KV cache size:"), std::string::npos);
  EXPECT_NE(r.out.find("Verdict:"), std::string::npos);
}

TEST(CliEstimate, APlanThatDoesNotFitExits4AfterPrintingIt) {
  // 70B in bf16 (131 GiB of weights) on one 24 GiB L4: it cannot even load.
  auto r = run_kvprof("estimate -m meta-llama/Llama-3.1-70B-Instruct -g L4 --json");
  EXPECT_EQ(r.rc, 4) << r.out;
  const auto j = kvprof::test::json_in(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.at("verdict"), "does_not_start");
  EXPECT_NE(r.out.find("kvprof: error: the plan does not fit: "), std::string::npos) << r.out;
  // A plan that fits exits 0.
  EXPECT_EQ(run_kvprof("estimate -m meta-llama/Llama-3.1-8B-Instruct -g H100").rc, 0);
}

TEST(CliEstimate, AnArchitectureGivenIsCheckedOrDescribesAnUnknownModel) {
  // The predecessor's "high confidence" flags: checked against a model kvprof reads...
  auto r = run_kvprof(
      "estimate -m meta-llama/Llama-3.1-8B-Instruct -g H100 --num-layers 40 "
      "--hidden-size 4096 --num-heads 32 --model-params 8e9 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = kvprof::test::json_in(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_NE(j.at("warnings").dump().find("num_layers 40 given, the model has 32"),
            std::string::npos)
      << j.at("warnings").dump();
  EXPECT_EQ(j.at("warnings").dump().find("hidden_size"), std::string::npos);  // it agrees

  // ...and describing one it cannot read (offline: no Hub): 6.7e9 parameters in bf16.
  r = run_kvprof(
      "estimate -m my-org/not-a-published-7b --offline -g H100 --model-params 6.7e9 "
      "--num-layers 32 --num-heads 32 --hidden-size 4096 --max-model-len 4096 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  j = kvprof::test::json_in(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_NE(j.at("warnings").dump().find("planned from the architecture given"), std::string::npos)
      << j.at("warnings").dump();
  const double weights_gib = j.at("per_gpu").at("weights_bytes").get<double>() / (1ULL << 30);
  EXPECT_NEAR(weights_gib, 6.7e9 * 2 / (1ULL << 30), 0.6) << weights_gib;
  // Without enough of it, the model that cannot be read is the error it was.
  EXPECT_EQ(run_kvprof("estimate -m my-org/not-a-published-7b --offline --num-layers 32").rc, 2);
}

TEST(CliEstimate, AMistypedCommandIsNamedWithTheClosestOne) {
  const auto r = run_kvprof("estimat -m qwen2.5-7b");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out,
            "kvprof: error: unknown command 'estimat' (did you mean 'estimate'?)\n"
            "Run kvprof --help for the commands.\n");
}

// A CPU llama.cpp plan shows the compute buffer as reserved and as resident, and its rows add up
// to the total (the untouched pages are a negative row); the JSON says the same. b8121's
// llama-server reserves logits for every token of the ubatch, which a server never touches.
TEST(CliEstimate, LlamaCppOnTheCpuShowsReservedAndResidentActivations) {
  const std::string args =
      "estimate --engine llamacpp --gpu cpu --host-mem 64GiB -m Qwen/Qwen2.5-0.5B-Instruct "
      "--engine-version b8121";
  const auto text = run_kvprof(args);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("activations (reserved; 0.02 resident)    0.31"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("activations never touched               -0.28"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("CPU compute buffer size =   313.51 MiB"), std::string::npos) << text.out;
  // From b9460 llama-server reserves one output per slot: the logits of one token (what the real
  // libllama reserves with n_outputs_max = 1, as kvprof serve sets it).
  const auto newest = run_kvprof(
      "estimate --engine llamacpp --gpu cpu --host-mem 64GiB "
      "-m Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_NE(newest.out.find("CPU compute buffer size =    39.51 MiB"), std::string::npos)
      << newest.out;
  const auto r = run_kvprof(args + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto pg = nlohmann::json::parse(r.out).at("per_gpu");
  const auto bytes = [&](const char* k) { return pg.at(k).get<int64_t>(); };
  EXPECT_NEAR(static_cast<double>(bytes("activation_bytes")) / (1 << 20), 313.51,
              0.005);  // the logged buffer
  EXPECT_GT(bytes("untouched_bytes"), 0);
  EXPECT_LT(bytes("overhead_bytes"), 0);
  EXPECT_EQ(bytes("weights_bytes") + bytes("kv_cache_bytes") + bytes("activation_bytes") +
                bytes("overhead_bytes"),
            bytes("total_bytes"));
}

TEST(CliEstimate, JsonHasUnitsInNamesAndEngineFigures) {
  const auto r = run_kvprof(
      "estimate -m qwen2.5-7b -g h100-sxm --max-model-len 8192 --context 8k "
      "--concurrency 1,32 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema_version"), 1);
  const auto& pg = j.at("per_gpu");
  for (const char* key : {"weights_bytes", "kv_cache_bytes", "activation_bytes", "cuda_graph_bytes",
                          "non_torch_bytes", "total_bytes"}) {
    EXPECT_TRUE(pg.contains(key)) << key;
  }
  EXPECT_EQ(j.at("kv_bytes_per_token"), 57344);  // 28 layers x 2 x 4 heads x 128 x 2 bytes
  const auto& rep = j.at("engine_report");
  EXPECT_EQ(rep.at("kv_cache_tokens").get<uint64_t>(),
            rep.at("num_gpu_blocks").get<uint64_t>() * 16);
  EXPECT_GT(rep.at("max_concurrency").get<double>(), 100.0);
  ASSERT_EQ(j.at("rows").size(), 2U);
  EXPECT_EQ(j.at("rows")[1].at("concurrency"), 32);
}

TEST(CliEstimate, VllmShortFlagsAreAccepted) {
  const auto r = run_kvprof("estimate -m llama-3.1-70b -g H100 -tp 4 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("settings").at("tensor_parallel_size"), 4);
}

TEST(CliEstimate, LlamaCppFlagsAsPeoplePasteThem) {
  const auto f16 = run_kvprof("estimate -m qwen2.5-7b --engine llamacpp -c 8192 -ngl 99 --json");
  ASSERT_EQ(f16.rc, 0) << f16.out;
  // A bare -fa (older llama.cpp) followed by another flag, and quantized K/V.
  const auto q8 = run_kvprof(
      "estimate -m qwen2.5-7b --engine llamacpp -c 8192 -fa -ctk q8_0 -ctv q8_0 -ngl 99 --json");
  ASSERT_EQ(q8.rc, 0) << q8.out;
  const auto a = nlohmann::json::parse(f16.out), b = nlohmann::json::parse(q8.out);
  EXPECT_EQ(a.at("llamacpp").at("kv_cells"), 8192);
  EXPECT_LT(b.at("kv_bytes_per_token").get<double>(), a.at("kv_bytes_per_token").get<double>());
  EXPECT_EQ(run_kvprof("estimate -m qwen2.5-7b --engine llamacpp -fa auto --json").rc, 0);
  EXPECT_EQ(run_kvprof("estimate -m qwen2.5-7b --engine llamacpp -fa maybe").rc, 2);
}

TEST(CliEstimate, CountsFollowVllmSuffixRules) {
  const auto decimal = run_kvprof("estimate -m qwen2.5-7b --max-model-len 32k --json");
  const auto binary = run_kvprof("estimate -m qwen2.5-7b --max-model-len 32K --json");
  ASSERT_EQ(decimal.rc, 0) << decimal.out;
  ASSERT_EQ(binary.rc, 0) << binary.out;
  EXPECT_EQ(nlohmann::json::parse(decimal.out).at("settings").at("max_model_len"), 32000);
  EXPECT_EQ(nlohmann::json::parse(binary.out).at("settings").at("max_model_len"), 32768);
  const auto bad = run_kvprof("estimate -m qwen2.5-7b --max-model-len 1.5K");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("did you mean 1.5k"), std::string::npos) << bad.out;
}

TEST(CliEstimate, SglangAndTensorRtLlmFlagNames) {
  const auto sglang = run_kvprof(
      "estimate -m llama-3.1-70b --engine sglang --tp-size 4 --context-length 8192 "
      "--mem-fraction-static 0.85 --max-running-requests 64 --disable-cuda-graph --json");
  ASSERT_EQ(sglang.rc, 0) << sglang.out;
  const auto s = nlohmann::json::parse(sglang.out).at("settings");
  EXPECT_EQ(s.at("tensor_parallel_size"), 4);
  EXPECT_EQ(s.at("max_num_seqs"), 64);
  EXPECT_EQ(s.at("enforce_eager"), true);
  const auto trt = run_kvprof(
      "estimate -m llama-3.1-8b --engine trtllm --tp_size 2 --max_seq_len 4096 "
      "--kv_cache_free_gpu_memory_fraction 0.8 --max_batch_size 32 --max_num_tokens 4096 --json");
  ASSERT_EQ(trt.rc, 0) << trt.out;
  const auto t = nlohmann::json::parse(trt.out).at("settings");
  EXPECT_EQ(t.at("tensor_parallel_size"), 2);
  EXPECT_EQ(t.at("max_model_len"), 4096);
  EXPECT_EQ(t.at("max_num_batched_tokens"), 4096);
  EXPECT_DOUBLE_EQ(t.at("gpu_memory_utilization").get<double>(), 0.8);
}

TEST(CliEstimate, UnknownFlagsGetTheClosestOne) {
  const auto r = run_kvprof("estimate --max-modle-len 8192");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("did you mean --max-model-len?"), std::string::npos) << r.out;
  const auto far = run_kvprof("estimate --completely-unrelated");
  EXPECT_EQ(far.rc, 2);
  EXPECT_NE(far.out.find("unknown flag --completely-unrelated"), std::string::npos) << far.out;
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << far.out;
  const auto profile = run_kvprof("profile --concurency 4");
  EXPECT_EQ(profile.rc, 2);
  EXPECT_NE(profile.out.find("did you mean --concurrencies?"), std::string::npos) << profile.out;
}

TEST(CliEstimate, JsonEchoesEveryAssumption) {
  const auto defaulted = run_kvprof("estimate -m qwen2.5-7b --json");
  ASSERT_EQ(defaulted.rc, 0) << defaulted.out;
  const auto a = nlohmann::json::parse(defaulted.out).at("assumptions");
  EXPECT_EQ(a.at("gpu").at("origin"), "assumed");
  EXPECT_EQ(a.at("gpu").at("id"), "H100-SXM");
  EXPECT_EQ(a.at("engine"), "vllm");
  EXPECT_EQ(a.at("engine_version_modelled"), "v0.19");
  EXPECT_EQ(a.at("settings").at("max_model_len").at("origin"), "default");
  EXPECT_EQ(a.at("settings").at("gpu_memory_utilization").at("value"), 0.9);
  const auto given = run_kvprof("estimate -m qwen2.5-7b -g L40S --max-model-len 8192 -tp 2 --json");
  ASSERT_EQ(given.rc, 0) << given.out;
  const auto b = nlohmann::json::parse(given.out).at("assumptions");
  EXPECT_EQ(b.at("gpu").at("origin"), "given");
  EXPECT_EQ(b.at("settings").at("max_model_len").at("origin"), "given");
  EXPECT_EQ(b.at("settings").at("max_model_len").at("value"), 8192);
  EXPECT_EQ(b.at("settings").at("tensor_parallel_size").at("origin"), "given");
  EXPECT_EQ(b.at("settings").at("dtype").at("origin"), "default");
  // The text names the version it models too.
  const auto text = run_kvprof("estimate -m qwen2.5-7b");
  EXPECT_NE(text.out.find("as kvprof models v0.19"), std::string::npos) << text.out;
}

TEST(CliEstimate, OutputFileIsWritten) {
  const auto path = std::filesystem::temp_directory_path() / "kvprof_cli_estimate.json";
  std::filesystem::remove(path);
  const auto r = run_kvprof("estimate --json -o " + path.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("kind"), "estimate");
  std::filesystem::remove(path);
}

TEST(CliEstimate, BadInputsExitTwoWithOneLine) {
  for (const char* args : {"estimate -m no-such-model", "estimate -g H1000",
                           "estimate -m llama-3.1-8b -tp 3", "estimate --gpu-memory-utilization 2",
                           "estimate --kv-cache-dtype fp7", "estimate --engine nope",
                           "estimate -m /nonexistent/config.json", "estimate --bogus-flag"}) {
    const auto r = run_kvprof(args);
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
    EXPECT_FALSE(r.out.empty()) << args;
  }
  const auto hint = run_kvprof("estimate -g H1000");
  EXPECT_NE(hint.out.find("did you mean"), std::string::npos) << hint.out;
}

TEST(CliEstimate, UnwritableOutputExitsOne) {
  const auto r = run_kvprof("estimate --json -o /nonexistent-dir/out.json");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("cannot write"), std::string::npos);
}

TEST(CliEstimate, MalformedConfigIsAClearInputError) {
  const auto dir = std::filesystem::temp_directory_path() / "kvprof_cli_bad_config";
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir / "config.json");
    out << "{\"num_hidden_layers\": 2, ";
  }
  const auto r = run_kvprof("estimate -m " + (dir / "config.json").string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("kvprof: error:"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(CliEstimate, RecommendListsOptions) {
  const auto r = run_kvprof("estimate -m llama-3.1-70b --max-model-len 8192 --recommend --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j.at("options").empty());
  EXPECT_GE(j.at("options")[0].at("gpu_count").get<int>(), 1);
  // 405B in bf16 (756 GiB) needs two nodes of 8 H100s: TP 8 within a node, PP 2 across.
  const auto big = run_kvprof("estimate -m llama-3.1-405b --max-model-len 8192 --recommend --json");
  ASSERT_EQ(big.rc, 0) << big.out;
  bool two_nodes = false;
  const auto big_json = nlohmann::json::parse(big.out);
  for (const auto& opt : big_json.at("options")) {
    if (opt.at("gpu_count") != 16) continue;
    two_nodes = true;
    EXPECT_EQ(opt.at("tensor_parallel_size"), 8);
    EXPECT_EQ(opt.at("engine_flags"), "--tensor-parallel-size 8 --pipeline-parallel-size 2");
  }
  EXPECT_TRUE(two_nodes) << big.out;
  const size_t n = j.at("options").size();
  ASSERT_GT(n, 12U);
  // The table shows 12 and says how many it hides; --all shows every one.
  const auto table = run_kvprof("estimate -m llama-3.1-70b --max-model-len 8192 --recommend");
  EXPECT_NE(table.out.find(fmt::format("{} more fit; --all shows them", n - 12)), std::string::npos)
      << table.out;
  const auto all = run_kvprof("estimate -m llama-3.1-70b --max-model-len 8192 --recommend --all");
  EXPECT_EQ(all.out.find("more fit"), std::string::npos);
  EXPECT_NE(all.out.find(fmt::format("{} GPU types fit", n)), std::string::npos) << all.out;
}

TEST(CliEstimate, ModelsAndGpusList) {
  const auto models = run_kvprof("models --search gemma --json");
  ASSERT_EQ(models.rc, 0);
  EXPECT_GE(nlohmann::json::parse(models.out).at("models").size(), 7U);
  const auto gpus = run_kvprof("gpus --json");
  ASSERT_EQ(gpus.rc, 0);
  const auto listed = nlohmann::json::parse(gpus.out).at("gpus");
  EXPECT_GE(listed.size(), 40U);
  EXPECT_EQ(listed.size(), kvprof::gpu::gpu_catalog().size());
  for (const auto& g : listed) {
    EXPECT_FALSE(g.at("source").get<std::string>().empty()) << g.at("id");
  }
}

TEST(CliHelp, EveryCommandHasHelp) {
  const auto top = run_kvprof("--help");
  ASSERT_EQ(top.rc, 0);
  for (const char* cmd : {"estimate", "models", "gpus", "env"}) {
    const auto r = run_kvprof(std::string(cmd) + " --help");
    EXPECT_EQ(r.rc, 0) << cmd;
    EXPECT_NE(r.out.find("--"), std::string::npos) << cmd;
  }
}

}  // namespace
