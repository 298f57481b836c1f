// Black-box tests of `kvprof parse-log`: table, --json, --engine, exit codes and one-line errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_kvprof.hpp"

namespace {

using kvprof::test::Run;
using kvprof::test::run_kvprof;

std::string fixture(const std::string& name) {
  return std::string(KVPROF_FIXTURES_DIR) + "/" + name;
}

TEST(CliParseLog, LlamaCppTableShowsFiguresDevicesAndLines) {
  const auto r = run_kvprof("parse-log " + fixture("llama_cpp_logs/startup_f16_np4.log"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("engine: llamacpp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CPU_Mapped"), std::string::npos);
  EXPECT_NE(r.out.find("110.53 MiB    93"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("148.01 MiB"), std::string::npos);
  EXPECT_NE(r.out.find("n_ctx_seq"), std::string::npos);
}

TEST(CliParseLog, JsonHasBytesLinesAndSettings) {
  const auto r =
      run_kvprof("parse-log --json " + fixture("llama_cpp_logs/startup_q8kv_fa_np4.log"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_EQ(j.at("kind"), "engine_log");
  EXPECT_EQ(j.at("engine"), "llamacpp");
  EXPECT_EQ(j.at("confidence"), "reported by engine");
  const auto& f = j.at("figures");
  ASSERT_EQ(f.size(), 6U);
  EXPECT_EQ(f[0].at("component"), "weights");
  EXPECT_EQ(f[0].at("device"), "CPU_Mapped");
  EXPECT_EQ(f[0].at("bytes").get<uint64_t>(), (12638ULL * (1 << 20) + 50) / 100);
  EXPECT_EQ(f[0].at("printed"), "126.38 MiB");
  EXPECT_EQ(f[0].at("line"), 93);
  EXPECT_EQ(j.at("settings").at("flash_attn").at("value"), "1");
  EXPECT_EQ(j.at("settings").at("n_ctx").at("value"), 32768);
  EXPECT_EQ(j.at("settings").at("type_k").at("value"), "q8_0");
  EXPECT_EQ(j.at("model").at("block_count").at("value"), 12);
  EXPECT_EQ(j.at("devices").size(), 2U);
}

TEST(CliParseLog, VllmQuoteIsDetected) {
  const auto path = std::filesystem::temp_directory_path() / "kvprof_parse_log_vllm.log";
  {
    std::ifstream in(fixture("vllm_startup_public.jsonl"));
    std::string line;
    std::getline(in, line);
    std::ofstream out(path);
    out << nlohmann::json::parse(line).at("quote").get<std::string>() << "\n";
  }
  const auto r = run_kvprof("parse-log --json " + path.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("engine"), "vllm");
  EXPECT_EQ(j.at("settings").at("num_gpu_blocks").at("value"), 7891);
  const auto forced = run_kvprof("parse-log --engine llamacpp " + path.string());
  EXPECT_EQ(forced.rc, 1) << forced.out;
  std::filesystem::remove(path);
}

TEST(CliParseLog, AV0LogSaysWhichReleaseToPlanItWith) {
  const auto path = std::filesystem::temp_directory_path() / "kvprof_parse_log_v0.log";
  {
    std::ofstream out(path);
    out << "INFO 03-25 21:32:47 model_runner.py:1116] Loading model weights took 14.9888 GB\n"
           "INFO 03-25 21:32:48 executor_base.py:108] # CUDA blocks: 2356, # CPU blocks: 2048\n";
  }
  const auto r = run_kvprof("parse-log " + path.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("no release printed; vLLM 0.7 by its wording"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plan it with --engine-version 0.7"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(run_kvprof("parse-log --json " + path.string()).out);
  EXPECT_EQ(j.at("release_from_wording").at("release"), "0.7");
  std::filesystem::remove(path);
}

TEST(CliParseLog, MissingFileIsOneLineExitTwo) {
  const auto r = run_kvprof("parse-log /no/such/engine.log");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "kvprof: error: no such file: /no/such/engine.log\n");
}

TEST(CliParseLog, AFifoIsRefusedAtOnceAndStandardInputIsRead) {
  // A FIFO no one writes to: refused, not waited on (the suite's timeout would catch a hang).
  const auto fifo = std::filesystem::temp_directory_path() /
                    ("kvprof_parse_log_fifo_" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run_kvprof("parse-log " + fifo.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "kvprof: error: '" + fifo.string() +
                       "' is not a regular file (a folder, FIFO, socket or device)\n");
  // compare and validate read run folders the same way: a summary.json that is a FIFO.
  const auto run_dir = std::filesystem::temp_directory_path() /
                       ("kvprof_parse_log_fifo_run_" + std::to_string(::getpid()));
  std::filesystem::create_directories(run_dir);
  ASSERT_EQ(::mkfifo((run_dir / "summary.json").c_str(), 0600), 0);
  for (const std::string& cmd :
       {"validate " + run_dir.string(), "compare " + run_dir.string() + " " + run_dir.string()}) {
    r = run_kvprof(cmd);
    EXPECT_EQ(r.rc, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("is not a regular file"), std::string::npos) << cmd << ": " << r.out;
  }
  std::filesystem::remove(fifo);
  std::filesystem::remove_all(run_dir);

  // "-" reads standard input to its end.
  r = run_kvprof("parse-log - < " + fixture("llama_cpp_logs/startup_f16_np4.log"));
  EXPECT_EQ(r.rc, 0) << r.out;
}

TEST(CliParseLog, NothingRecognisedExitsOne) {
  const auto path = std::filesystem::temp_directory_path() / "kvprof_parse_log_empty.log";
  {
    std::ofstream out(path);
    out << "hello\nnothing here\n";
  }
  const auto r = run_kvprof("parse-log " + path.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("no memory lines recognised"), std::string::npos) << r.out;
  std::filesystem::remove(path);
}

TEST(CliParseLog, BadEngineIsUsageError) {
  const auto r =
      run_kvprof("parse-log --engine mlc " + fixture("llama_cpp_logs/startup_f16_np4.log"));
  EXPECT_EQ(r.rc, 2);
}

}  // namespace
