// End-to-end: `kvprof sweep` of serve-sim launches (two models x two settings): the dry run first
// (the plan, nothing started), then the sweep with its files and history; a sweep interrupted by
// Ctrl-C and run again finishes only what was left; a configuration that fails is recorded and the
// sweep goes on; a bad file lists every problem with its line and exits 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/sys/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

class SweepE2e : public test::TempDirTest {
 protected:
  SweepE2e() : TempDirTest("kvprof_sweep") {}

  // A launch line for serve-sim publishing its memory to the fake NVML's live file.
  std::string serve_sim_launch() const {
    return std::string(KVPROF_BIN) +
           " serve-sim --model {model} --gpu {gpu} --host {host} --port {port} "
           "--max-num-seqs {max_concurrency} --max-model-len {max_model_len} --live-state " +
           (m_dir / "live.txt").string();
  }

  // Short phases so each configuration takes well under a second.
  std::string header(double baseline_s = 0.05) const {
    return "baseline_s: " + std::to_string(baseline_s) +
           "\npost_warmup_s: 0.05\nwarmup_requests: 1\nmin_condition_s: 0.05\ngpu: H100\n"
           "input_lengths: [64]\noutput_lengths: [4]\nlaunch: \"" +
           serve_sim_launch() + "\"\n";
  }

  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path p = m_dir / name;
    std::ofstream(p) << text;
    return p;
  }

  sys::CommandResult kvprof(std::vector<std::string> args,
                            std::function<void(pid_t)> on_spawn = {}) const {
    args.insert(args.begin(), KVPROF_BIN);
    sys::CommandOptions o;
    o.timeout = 120s;
    o.on_spawn = std::move(on_spawn);
    o.env = {{"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
             {"KVPROF_FAKE_NVML_GPUS", "1"},
             {"KVPROF_FAKE_NVML_LIVE", (m_dir / "live.txt").string()},
             {"KVPROF_OUTPUT_DIR", ""}};
    auto r = sys::run_command(args, o);
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  }

  // Runs `args` and presses Ctrl-C once `ready()` says so (polled every 10 ms, for 30 s at most,
  // after `delay`); `sent` says whether it was pressed.
  sys::CommandResult kvprof_interrupted(std::vector<std::string> args,
                                        const std::function<bool()>& ready, bool& sent,
                                        std::chrono::milliseconds delay = 0ms) const {
    std::thread interrupter;
    std::atomic<bool> pressed{false};
    auto r = kvprof(std::move(args), [&](pid_t pid) {
      interrupter = std::thread([&, pid] {
        for (int i = 0; i < 3000 && !pressed; ++i) {
          if (ready()) {
            std::this_thread::sleep_for(delay);
            ::kill(pid, SIGINT);
            pressed = true;
          }
          std::this_thread::sleep_for(10ms);
        }
      });
    });
    if (interrupter.joinable()) interrupter.join();
    sent = pressed;
    return r;
  }

  static std::string text_of(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  std::vector<std::string> run_folders() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(m_dir / "results", ec)) {
      if (e.is_directory() && e.path().filename() != "sweeps")
        out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  json read_json(const fs::path& p) const {
    std::ifstream in(p);
    return json::parse(in);
  }
};

TEST_F(SweepE2e, ServeSimLaunchesTwoModelsTwoSettingsDryRunThenRun) {
  const fs::path config = write("grid.yaml", header() + R"(models:
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    batch_sizes: [1, 2]
    max_model_len: 2048
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    batch_sizes: [1, 2]
    max_model_len: 4096
    gpu_memory_utilization: 0.8
  - model_id: Qwen/Qwen2.5-7B-Instruct
    batch_sizes: [1, 2]
    max_model_len: 2048
  - model_id: Qwen/Qwen2.5-7B-Instruct
    batch_sizes: [1, 2]
    max_model_len: 4096
    gpu_memory_utilization: 0.8
)");
  const std::string out_dir = (m_dir / "results").string();

  // The dry run: the plan as JSON, quickly, and nothing started or written.
  const auto t0 = std::chrono::steady_clock::now();
  auto dry = kvprof(
      {"sweep", "--config", config.string(), "--dry-run", "--json", "--output-dir", out_dir});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  ASSERT_EQ(dry.exit_code, 0) << dry.stderr_text;
  const json plan = json::parse(dry.stdout_text);
  EXPECT_EQ(plan.at("n_configurations"), 4);
  EXPECT_EQ(plan.at("n_runnable"), 4);
  EXPECT_EQ(plan.at("n_conditions"), 8);
  EXPECT_GT(plan.at("expected_s").get<double>(), 4 * 60.0);  // four server starts
  const json& c1 = plan.at("configurations").at(1);
  EXPECT_EQ(c1.at("status"), "pending");
  EXPECT_EQ(c1.at("server"), "launch");
  // The lower utilization leaves less memory and a smaller KV cache than the first setting.
  const json& c0 = plan.at("configurations").at(0);
  EXPECT_LT(c1.at("estimate").at("per_gpu_total_bytes").get<uint64_t>(),
            c0.at("estimate").at("per_gpu_total_bytes").get<uint64_t>());
  EXPECT_LT(c1.at("conditions").at(0).at("kv_capacity_bytes").get<uint64_t>(),
            c0.at("conditions").at(0).at("kv_capacity_bytes").get<uint64_t>());
  EXPECT_FALSE(fs::exists(m_dir / "results"));

  // The sweep: four launched servers, one profile run each.
  auto r = kvprof({"sweep", "--config", config.string(), "--output-dir", out_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("[4/4] Qwen/Qwen2.5-7B-Instruct"), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("sweep ETA"), std::string::npos);
  EXPECT_EQ(run_folders().size(), 4u);
  const fs::path sdir = m_dir / "results" / "sweeps" / "grid";
  const json sweep = read_json(sdir / "sweep.json");
  EXPECT_EQ(sweep.at("status"), "completed");
  for (const auto& c : sweep.at("configurations")) {
    EXPECT_EQ(c.at("status"), "done") << c.dump();
    const std::string run_dir = c.at("run").at("run_dir");
    EXPECT_TRUE(fs::exists(fs::path(run_dir) / "summary.json"));
    const json summary = read_json(fs::path(run_dir) / "summary.json");
    EXPECT_EQ(summary.at("model_info").at("name"), c.at("model_id"));
    EXPECT_NE(
        summary.at("launch").at("command").get<std::string>().find(
            "--max-model-len " + std::to_string(c.at("settings").at("max_model_len").get<int>())),
        std::string::npos);
    // The simulated memory was measured through the fake NVML.
    EXPECT_GT(c.at("run").at("measured").at("peak_used_bytes").get<uint64_t>(), 10ull << 30);
  }
  // sweep_summary.csv: a header and one row per condition, each with the run and a peak.
  std::ifstream csv(sdir / "sweep_summary.csv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(csv, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[0].substr(0, 23), "configuration,model_id,");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_NE(lines[i].find(",done,20"), std::string::npos) << lines[i];
  }

  // The history has the four runs, in this sweep, and the sweep itself.
  auto runs = kvprof({"runs", "--results-dir", out_dir, "--json"});
  ASSERT_EQ(runs.exit_code, 0) << runs.stderr_text;
  const json h = json::parse(runs.stdout_text);
  size_t n_profile = 0, n_sweep = 0;
  for (const auto& e : h.at("entries")) {
    if (e.at("kind") == "profile") {
      ++n_profile;
      EXPECT_EQ(e.at("sweep"), "grid");
      EXPECT_EQ(e.at("status"), "completed");
      EXPECT_TRUE(e.at("folder_exists").get<bool>());
    }
    n_sweep += e.at("kind") == "sweep" ? 1 : 0;
  }
  EXPECT_EQ(n_profile, 4u);
  EXPECT_EQ(n_sweep, 1u);
  auto qwen =
      kvprof({"runs", "--results-dir", out_dir, "--json", "--model", "qwen", "--kind", "profile"});
  EXPECT_EQ(json::parse(qwen.stdout_text).at("n_entries"), 2);
}

TEST_F(SweepE2e, InterruptedSweepRunAgainFinishesOnlyWhatWasLeft) {
  // A longer baseline so that Ctrl-C lands inside the second configuration.
  const fs::path config = write("resume.yaml", header(1.5) + R"(models:
  - {model_id: meta-llama/Llama-3.1-8B-Instruct, batch_sizes: [1], max_model_len: 2048}
  - {model_id: meta-llama/Llama-3.1-8B-Instruct, batch_sizes: [2], max_model_len: 2048}
  - {model_id: Qwen/Qwen2.5-7B-Instruct, batch_sizes: [1], max_model_len: 2048}
)");
  const std::string out_dir = (m_dir / "results").string();
  const fs::path state_file = m_dir / "results" / "sweeps" / "resume" / "sweep_state.json";
  bool sent = false;
  // Once the first configuration is done, press Ctrl-C.
  auto first = kvprof_interrupted(
      {"sweep", "--config", config.string(), "--output-dir", out_dir},
      [&] { return text_of(state_file).find("\"done\"") != std::string::npos; }, sent, 300ms);
  ASSERT_TRUE(sent);
  EXPECT_EQ(first.exit_code, 130) << first.stderr_text;
  EXPECT_NE(first.stderr_text.find("run the same command again"), std::string::npos)
      << first.stderr_text;
  json sweep = read_json(m_dir / "results" / "sweeps" / "resume" / "sweep.json");
  EXPECT_EQ(sweep.at("status"), "interrupted");
  const auto& cs = sweep.at("configurations");
  EXPECT_EQ(cs.at(0).at("status"), "done");
  EXPECT_EQ(cs.at(1).at("status"), "interrupted");
  EXPECT_EQ(cs.at(2).at("status"), "pending");
  const std::string first_run = cs.at(0).at("run").at("run_id");

  // Run again: the first is skipped, the other two run.
  auto second = kvprof({"sweep", "--config", config.string(), "--output-dir", out_dir});
  ASSERT_EQ(second.exit_code, 0) << second.stderr_text;
  EXPECT_NE(second.stderr_text.find("[1/3] meta-llama/Llama-3.1-8B-Instruct tp1 len 2048: "
                                    "already done (run " +
                                    first_run + ")"),
            std::string::npos)
      << second.stderr_text;
  EXPECT_NE(second.stdout_text.find("2 ran now (2 done"), std::string::npos) << second.stdout_text;
  sweep = read_json(m_dir / "results" / "sweeps" / "resume" / "sweep.json");
  EXPECT_EQ(sweep.at("status"), "completed");
  for (const auto& c : sweep.at("configurations"))
    EXPECT_EQ(c.at("status"), "done");
  EXPECT_EQ(sweep.at("configurations").at(0).at("run").at("run_id"), first_run);
  EXPECT_EQ(sweep.at("configurations").at(1).at("run").at("attempts"), 2);
  EXPECT_EQ(sweep.at("configurations").at(2).at("run").at("attempts"), 1);

  // A third time: nothing left to do.
  auto third = kvprof({"sweep", "--config", config.string(), "--output-dir", out_dir, "-q"});
  EXPECT_EQ(third.exit_code, 0);
  EXPECT_NE(third.stdout_text.find("0 ran now"), std::string::npos) << third.stdout_text;
}

TEST_F(SweepE2e, AConfigurationInterruptedMidwayRunsOnlyTheConditionsItHadNotFinished) {
  // One configuration of four conditions (batch 1, 2, 3, 4), each lasting at least 0.4 s.
  std::string text = header(0.05);
  text.replace(text.find("min_condition_s: 0.05"), 21, "min_condition_s: 0.4");
  const fs::path config = write("midway.yaml", text + R"(models:
  - {model_id: meta-llama/Llama-3.1-8B-Instruct, batch_sizes: [1, 2, 3, 4], max_model_len: 2048}
)");
  const std::string out_dir = (m_dir / "results").string();
  bool sent = false;
  // Once the trace has a request of the third condition, the first two are finished.
  auto first = kvprof_interrupted(
      {"sweep", "--config", config.string(), "--output-dir", out_dir},
      [&] {
        for (const auto& run : run_folders()) {
          if (text_of(m_dir / "results" / run / "request_trace.csv").find(",in64_out4_c3_low,") !=
              std::string::npos)
            return true;
        }
        return false;
      },
      sent);
  ASSERT_TRUE(sent);
  EXPECT_EQ(first.exit_code, 130) << first.stderr_text;
  const fs::path sweep_dir = m_dir / "results" / "sweeps" / "midway";
  json sweep = read_json(sweep_dir / "sweep.json");
  const json& c0 = sweep.at("configurations").at(0);
  EXPECT_EQ(c0.at("status"), "interrupted");
  const std::string first_run = c0.at("run").at("run_id");
  const json& measured = c0.at("run").at("measured").at("conditions");
  ASSERT_TRUE(measured.contains("in64_out4_c1_low")) << measured.dump(1);
  ASSERT_TRUE(measured.contains("in64_out4_c2_low")) << measured.dump(1);
  EXPECT_FALSE(measured.contains("in64_out4_c4_low")) << measured.dump(1);
  // The condition the stop cut short is kept as such, and runs again.
  if (measured.contains("in64_out4_c3_low")) {
    EXPECT_EQ(measured.at("in64_out4_c3_low").value("completed", true), false);
  }
  ASSERT_EQ(run_folders().size(), 1U);

  // Run again: the two finished conditions are not sent again; the other two are.
  auto second = kvprof({"sweep", "--config", config.string(), "--output-dir", out_dir});
  ASSERT_EQ(second.exit_code, 0) << second.stderr_text;
  EXPECT_NE(second.stderr_text.find("4 conditions, 2 measured before by run " + first_run),
            std::string::npos)
      << second.stderr_text;
  const auto runs = run_folders();
  ASSERT_EQ(runs.size(), 2U);
  const std::string second_run = runs[0] == first_run ? runs[1] : runs[0];
  std::ifstream in(m_dir / "results" / second_run / "request_trace.csv");
  const std::string trace((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(trace.find(",in64_out4_c1_low,"), std::string::npos) << trace;
  EXPECT_EQ(trace.find(",in64_out4_c2_low,"), std::string::npos) << trace;
  EXPECT_NE(trace.find(",in64_out4_c3_low,"), std::string::npos) << trace;
  EXPECT_NE(trace.find(",in64_out4_c4_low,"), std::string::npos) << trace;
  const json manifest = read_json(m_dir / "results" / second_run / "manifest.json");
  EXPECT_EQ(manifest.dump().find("\"conditions_measured_before\":2") != std::string::npos, true)
      << manifest.dump(1);

  sweep = read_json(sweep_dir / "sweep.json");
  const json& c = sweep.at("configurations").at(0);
  EXPECT_EQ(c.at("status"), "done");
  EXPECT_EQ(c.at("run").at("run_id"), second_run);
  ASSERT_EQ(c.at("run").at("runs").size(), 2U);
  const json& all = c.at("run").at("measured").at("conditions");
  ASSERT_EQ(all.size(), 4U) << all.dump(1);
  EXPECT_EQ(all.at("in64_out4_c1_low").at("run_id"), first_run);
  EXPECT_EQ(all.at("in64_out4_c2_low").at("run_id"), first_run);
  EXPECT_EQ(all.at("in64_out4_c3_low").at("run_id"), second_run);
  EXPECT_EQ(all.at("in64_out4_c4_low").at("run_id"), second_run);
  for (const auto& [cid, m] : all.items())
    EXPECT_GT(m.at("n_ok").get<double>(), 0) << cid;
  // The CSV names the run of each row.
  std::ifstream csv_in(sweep_dir / "sweep_summary.csv");
  const std::string csv((std::istreambuf_iterator<char>(csv_in)), {});
  EXPECT_NE(csv.find(",64,4,1,done," + first_run + ","), std::string::npos) << csv;
  EXPECT_NE(csv.find(",64,4,4,done," + second_run + ","), std::string::npos) << csv;

  // Stopped after its last condition ended: nothing is left to run, no server is started.
  const fs::path state_file = sweep_dir / "sweep_state.json";
  std::string state = text_of(state_file);
  const auto at = state.find("\"status\": \"done\"");
  ASSERT_NE(at, std::string::npos) << state;
  state.replace(at, 16, "\"status\": \"interrupted\"");
  std::ofstream(state_file, std::ios::trunc) << state;
  auto third = kvprof({"sweep", "--config", config.string(), "--output-dir", out_dir});
  ASSERT_EQ(third.exit_code, 0) << third.stderr_text;
  EXPECT_EQ(run_folders().size(), 2U);
  EXPECT_EQ(read_json(sweep_dir / "sweep.json").at("configurations").at(0).at("status"), "done");
}

TEST_F(SweepE2e, HostileNamesInTheSweepFileRunNothing) {
  const fs::path marker = m_dir / "pwned";
  const fs::path printed = m_dir / "words.txt";
  const std::string inject = ";touch " + marker.string() + ";echo";
  // A model the catalog lacks (its architecture given) and a quantization, each carrying a
  // command; the "server" writes the words it was given and exits.
  const fs::path config = write("hostile.yaml", R"(gpu: H100
input_lengths: [64]
output_lengths: [4]
models:
  - model_id: "x)" + inject + R"("
    num_layers: 4
    hidden_size: 512
    num_heads: 8
    max_model_len: 1024
    batch_sizes: [1]
    quantization: "fp8)" + inject + R"("
    launch: "printf '%s\n' {model} {engine_args} > )" +
                                                    printed.string() + R"(; exit 7"
)");
  auto r = kvprof({"sweep", "--config", config.string(), "--output-dir",
                   (m_dir / "results").string(), "--run-unfit", "-q"});
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_FALSE(fs::exists(marker)) << "a value from the sweep file ran as a command";
  std::ifstream in(printed);
  const std::string words((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(words.find("x" + inject + "\n--tensor-parallel-size\n1\n"), std::string::npos) << words;
  EXPECT_NE(words.find("--quantization\nfp8" + inject + "\n"), std::string::npos) << words;
}

TEST_F(SweepE2e, TheSimulatorPlaysOneGpuOfATensorParallelGroup) {
  // 70B on four H100s: the plan fits at TP 4, and the built-in simulator runs one GPU of the group
  // with its share (it failed before: it sized the whole model onto one GPU).
  const fs::path config = write("tp4.yaml", R"(gpu: H100
baseline_s: 0.05
post_warmup_s: 0.05
min_condition_s: 0.05
input_lengths: [64]
output_lengths: [4]
batch_sizes: [1]
models:
  - model_id: meta-llama/Llama-3.1-70B-Instruct
    tensor_parallel_size: 4
    max_model_len: 4096
)");
  auto dry = kvprof({"sweep", "--config", config.string(), "--dry-run", "--output-dir",
                     (m_dir / "results").string()});
  EXPECT_EQ(dry.exit_code, 0) << dry.stderr_text;
  EXPECT_NE(dry.stdout_text.find("the built-in simulator plays one GPU of the 4"),
            std::string::npos)
      << dry.stdout_text;
  auto r = kvprof(
      {"sweep", "--config", config.string(), "--output-dir", (m_dir / "results").string(), "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  const json sweep = read_json(m_dir / "results" / "sweeps" / "tp4" / "sweep.json");
  const auto& c = sweep.at("configurations").at(0);
  EXPECT_EQ(c.at("status"), "done") << c.dump();
  // The simulated GPU holds a quarter of the 70B's weights, as planned per GPU.
  const double weights = c.at("run").at("measured").at("weights_bytes").get<double>();
  EXPECT_NEAR(weights, c.at("estimate").at("weights_bytes").get<double>(), 0.05 * weights);
  EXPECT_LT(weights, 40.0 * (1ULL << 30));
}

TEST_F(SweepE2e, AFailedConfigurationIsRecordedAndTheSweepGoesOn) {
  const fs::path config = write("fails.yaml", header() + R"(models:
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    batch_sizes: [1]
    launch: "echo 'CUDA out of memory' >&2; exit 7"
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    batch_sizes: [1]
    max_model_len: 2048
  - model_id: meta-llama/Llama-3.1-70B-Instruct
    batch_sizes: [1]
    max_model_len: 2048
)");
  auto r = kvprof(
      {"sweep", "--config", config.string(), "--output-dir", (m_dir / "results").string(), "-q"});
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("1 configuration(s) failed: 01_llama-3.1-8b-instruct"),
            std::string::npos)
      << r.stderr_text;
  const json sweep = read_json(m_dir / "results" / "sweeps" / "fails" / "sweep.json");
  const auto& cs = sweep.at("configurations");
  EXPECT_EQ(cs.at(0).at("status"), "failed");
  EXPECT_NE(cs.at(0).at("run").at("reason").get<std::string>().find("exited with code 7"),
            std::string::npos)
      << cs.at(0).dump();
  EXPECT_EQ(cs.at(1).at("status"), "done");
  // 70B in bf16 on one H100: the plan says why and it is not started.
  EXPECT_EQ(cs.at(2).at("status"), "skipped");
  EXPECT_FALSE(cs.at(2).at("fits").get<bool>());
  EXPECT_NE(cs.at(2).at("reason").get<std::string>().find("GiB per GPU"), std::string::npos);
  EXPECT_EQ(sweep.at("status"), "completed_with_failures");
}

TEST_F(SweepE2e, BadFileListsEveryProblemWithItsLineAndExits2) {
  const fs::path config = write("bad.yaml", R"(launch_timeout_s: soon
models:
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    input_lengths: 512
    output_lengths: [64]
    batch_sizes: [1, 8]
    tensor_parallel_sizes: 2
  - input_lengths: [64]
    output_lengths: [4]
    batch_sizes: [1]
  - model_id: no-such-org/no-such-model
    input_lengths: [64]
    output_lengths: [4]
    batch_sizes: ["eight"]
)");
  auto r = kvprof({"sweep", "--config", config.string(), "--dry-run", "--output-dir",
                   (m_dir / "results").string()});
  EXPECT_EQ(r.exit_code, 2);
  const std::string f = config.string();
  const std::string& e = r.stderr_text;
  EXPECT_NE(e.find(f + ":1:19: error: launch_timeout_s: expected a number, got 'soon'"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(f + ":4:20: error: models[0].input_lengths: expected a list of integers"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(f + ":7:5: error: models[0]: unknown key 'tensor_parallel_sizes' (did you "
                       "mean 'tensor_parallel_size'?)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(f + ":8:5: error: models[1]: missing required key 'model_id'"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(f + ":14:19: error: models[2].batch_sizes[0]: expected an integer"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("5 problems in " + f), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(m_dir / "results"));

  // A file saved in Latin-1 (an e-acute, 0xe9): one problem at its place, not an internal error.
  const fs::path latin1 = write("latin1.yaml", "models:\n  - model_id: caf\xe9-7b\n");
  r = kvprof({"sweep", "--config", latin1.string(), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(latin1.string() + ":2:18: error: the file is not UTF-8 here"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("internal error"), std::string::npos) << r.stderr_text;

  // Once the types are right, a model that is neither known nor described is one more problem,
  // at its line.
  const fs::path unknown = write("unknown.yaml", R"(models:
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    input_lengths: [64]
    output_lengths: [4]
    batch_sizes: [1]
  - model_id: no-such-org/no-such-model
    input_lengths: [64]
    output_lengths: [4]
    batch_sizes: [1]
)");
  r = kvprof({"sweep", "--config", unknown.string(), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find(unknown.string() + ":6:15: error: models[1].model_id:"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("num_layers, hidden_size and num_heads"), std::string::npos);
}

}  // namespace
}  // namespace kvprof
