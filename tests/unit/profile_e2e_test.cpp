// End-to-end: the kvprof binary's `profile` against serve-sim (in this test process, writing its
// live memory for the fake libnvidia-ml.so.1), checking the contents of every output file; the
// built-in default run; and the failures (server down, faults, no /metrics, no NVML, Ctrl-C).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/sim/sim_server.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/run_folders.hpp"
#include "support/sim_server_test.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

// One CSV line into fields ("" quoting as the trace writers do it).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// A CSV file as rows of column -> value.
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto fields = csv_fields(line);
    if (header.empty()) {
      header = fields;
      continue;
    }
    EXPECT_EQ(fields.size(), header.size()) << path << ": " << line;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < fields.size(); ++i)
      row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

size_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  return static_cast<size_t>(
      std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

double num(const std::map<std::string, std::string>& row, const std::string& key) {
  return std::stod(row.at(key));
}

class ProfileE2E : public test::SimServerTest {
 protected:
  ProfileE2E() : SimServerTest("kvprof_profile") {}

  // A small simulated vLLM whose KV pool shows in memory as it fills (so load is visible); a lone
  // request lasts ~100 ms: several scrapes per condition.
  sim::SimConfig small_sim() const { return small_vllm(5.0); }

  void start_sim(const sim::SimConfig& c) { start_server(c); }

  // Presses Ctrl-C (SIGINT) on the kvprof `o` starts once a run folder's request_trace.csv has
  // `lines` lines (its header included), polling every 5 ms for at most 15 s; `killer` is the
  // thread doing it, for the caller to join.
  void sigint_after_trace_lines(sys::CommandOptions& o, std::thread& killer, size_t lines) const {
    o.on_spawn = [&killer, lines, results = m_dir / "results"](pid_t pid) {
      killer = std::thread([pid, results, lines] {
        for (int i = 0; i < 3000; ++i) {
          std::this_thread::sleep_for(5ms);
          std::error_code ec;
          for (const auto& e : fs::directory_iterator(results, ec)) {
            if (count_lines(e.path() / "request_trace.csv") >= lines) {
              ::kill(pid, SIGINT);
              return;
            }
          }
        }
      });
    };
  }

  sys::CommandOptions env(bool with_nvml = true) const {
    sys::CommandOptions o;
    o.timeout = 60s;
    o.env = {{"KVPROF_NVML_LIBRARY",
              with_nvml ? std::string(KVPROF_FAKE_NVML_PATH) : (m_dir / "absent.so").string()},
             {"KVPROF_FAKE_NVML_GPUS", "1"},
             {"KVPROF_FAKE_NVML_LIVE", (m_dir / "live.txt").string()},
             {"KVPROF_URL", ""},
             {"KVPROF_MODEL", ""}};
    return o;
  }

  std::vector<std::string> profile_args(std::vector<std::string> extra) const {
    std::vector<std::string> args = {KVPROF_BIN,
                                     "profile",
                                     "--endpoint",
                                     m_server ? m_server->base_url() : "",
                                     "--output-dir",
                                     (m_dir / "results").string(),
                                     "--run-tag",
                                     "e2e",
                                     "--baseline-s",
                                     "0.3",
                                     "--post-warmup-s",
                                     "0.2",
                                     "--gpu-interval-ms",
                                     "5",
                                     "--metrics-interval-ms",
                                     "20",
                                     "--min-condition-s",  // each request once: counts are exact
                                     "0",
                                     "--output-lens",
                                     "16",
                                     "--prefix-modes",
                                     "low",
                                     "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // The one run directory under results/.
  fs::path run_dir() const {
    const std::vector<fs::path> dirs = test::run_folders(m_dir / "results");
    EXPECT_EQ(dirs.size(), 1U);
    return dirs.empty() ? fs::path() : dirs.front();
  }
};

TEST_F(ProfileE2E, EveryOutputFileHoldsTheRun) {
  // Steps of 10 ms, not 5: the 16 requests of a batch then overlap for long enough that a scrape
  // sees them all even on a loaded machine (at 5 ms a TSan build beside fuzzers once saw 4).
  start_sim(small_vllm(10.0));
  auto r = sys::run_command(profile_args({"--input-lens", "256,1024", "--concurrencies", "1,4,16",
                                          "--json", "--read-interval-us", "500"}),
                            env());
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->exit_code, 0) << r->stderr_text << r->stdout_text;
  const fs::path dir = run_dir();
  EXPECT_TRUE(dir.filename().string().ends_with("_e2e"));

  // workload.jsonl: every line a request — 2 inputs x 3 concurrencies, n x concurrency requests
  // each — and the generator of their prompts beside it.
  const size_t n_requests = count_lines(dir / "workload.jsonl");
  EXPECT_EQ(n_requests, 2U * (1 + 4 + 16));
  {
    std::ifstream lines(dir / "workload.jsonl");
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(json::parse(line).contains("request_id")) << line;
  }
  EXPECT_EQ(count_lines(dir / "workload.generator.json"), 1U);

  // request_trace.csv: one ok row per workload request, times ordered, TTFT <= E2E.
  const auto trace = read_csv(dir / "request_trace.csv");
  ASSERT_EQ(trace.size(), n_requests);
  std::set<std::string> ids;
  for (const auto& row : trace) {
    ids.insert(row.at("request_id"));
    EXPECT_EQ(row.at("status"), "ok") << row.at("error");
    EXPECT_LE(num(row, "intended_send_unix_s"), num(row, "actual_send_unix_s") + 1e-6);
    EXPECT_LE(num(row, "actual_send_unix_s"), num(row, "first_token_unix_s"));
    EXPECT_LE(num(row, "first_token_unix_s"), num(row, "end_unix_s"));
    EXPECT_LE(num(row, "ttft_ms"), num(row, "e2e_ms"));
    EXPECT_EQ(row.at("completion_tokens"), "16");
    EXPECT_EQ(row.at("prompt_tokens"), row.at("input_len"));
  }
  EXPECT_EQ(ids.size(), n_requests);

  // gpu_mem_trace.csv: device rows from the fake NVML, time-ordered, used within total.
  const auto gpu = read_csv(dir / "gpu_mem_trace.csv");
  ASSERT_GT(gpu.size(), 50U);
  int64_t last_t = 0;
  uint64_t max_used = 0;
  for (const auto& row : gpu) {
    if (row.at("kind") != "device") continue;
    const int64_t t = std::stoll(row.at("t_mono_ns"));
    EXPECT_GE(t, last_t);
    last_t = t;
    EXPECT_LE(std::stoull(row.at("used_bytes")), std::stoull(row.at("total_bytes")));
    max_used = std::max<uint64_t>(max_used, std::stoull(row.at("used_bytes")));
  }

  // metrics_trace.csv: ok scrapes of the simulated vLLM, time-ordered.
  const auto metrics = read_csv(dir / "metrics_trace.csv");
  ASSERT_GT(metrics.size(), 10U);
  int64_t last_m = 0;
  for (const auto& row : metrics) {
    EXPECT_EQ(row.at("status"), "ok");
    EXPECT_GE(std::stoll(row.at("mono_ns")), last_m);
    last_m = std::stoll(row.at("mono_ns"));
  }

  // summary.json (also what --json printed).
  const json s = read_json(dir / "summary.json");
  EXPECT_EQ(json::parse(r->stdout_text), s);
  EXPECT_EQ(s.at("schema_version"), "2.0");
  EXPECT_FALSE(s.at("interrupted").get<bool>());
  EXPECT_EQ(s.at("memory_source"), "nvml");
  EXPECT_EQ(s.at("requests").at("n_ok").get<size_t>(), n_requests);
  // Every request's body came in at least one read; the raw transport stamps them with the
  // kernel's receive times (libcurl with its callback times).
  const auto reads = s.at("requests").at("reads").get<size_t>();
  EXPECT_GE(reads, n_requests);
  const auto stamped = s.at("requests").at("kernel_timestamped_reads").get<size_t>();
  EXPECT_LE(stamped, reads);
  EXPECT_EQ(stamped > 0,
            read_json(dir / "manifest.json").at("configuration").at("transport") == "raw");
  EXPECT_EQ(s.at("engine_metadata").at("engine_type"), "vllm");
  const auto& mm = s.at("memory_measurements");
  const uint64_t baseline = mm.at("baseline").at("total_bytes");
  const uint64_t post_warmup = mm.at("post_warmup").at("total_bytes");
  const uint64_t peak = mm.at("peak").at("total_bytes");
  EXPECT_GE(baseline, 8ULL << 30);  // the weights are loaded before any request
  EXPECT_LE(baseline, post_warmup);
  EXPECT_LT(post_warmup, peak);
  EXPECT_EQ(peak, max_used);
  EXPECT_EQ(mm.at("peak").at("per_gpu_details")[0].at("name"), "NVIDIA H100 80GB HBM3 (fake)");
  EXPECT_EQ(mm.at("peak").at("stats").at("stddev_bytes"), 0.0);

  // Per condition: KV usage rises with concurrency, and memory peaks where the load peaks.
  const auto& conds = s.at("conditions");
  ASSERT_EQ(conds.size(), 6U);
  std::map<std::string, json> by_id;
  for (const auto& c : conds)
    by_id[c.at("condition_id")] = c;
  for (const char* in : {"256", "1024"}) {
    const auto kv = [&](const char* c) {
      return by_id.at(std::string("in") + in + "_out16_c" + c + "_low")
          .at("peak_kv_cache_usage")
          .get<double>();
    };
    EXPECT_LT(kv("1"), kv("4")) << in;
    EXPECT_LT(kv("4"), kv("16")) << in;
  }
  uint64_t top = 0;
  std::string top_id;
  for (const auto& c : conds) {
    EXPECT_GT(c.at("output_tokens_per_s").get<double>(), 0.0);
    EXPECT_LE(c.at("ttft_ms").at("p50").get<double>(), c.at("e2e_ms").at("p50").get<double>());
    if (c.at("peak_used_bytes").get<uint64_t>() > top) {
      top = c.at("peak_used_bytes");
      top_id = c.at("condition_id");
    }
  }
  EXPECT_EQ(top_id, "in1024_out16_c16_low");
  EXPECT_EQ(top, peak);

  // The on-demand pool is measured from its growth with the KV gauge.
  const auto& b = s.at("memory_breakdown");
  EXPECT_EQ(b.at("confidence_levels").at("kv_cache"), "medium");
  const double kv_gib = b.at("kv_cache_gib");
  const double peak_usage = s.at("server_metrics").at("peak_kv_cache_usage");
  const double expected_kv_gib = peak_usage * 2048 * 4.0 / 1024;  // usage x blocks x 4 MiB
  EXPECT_NEAR(kv_gib, expected_kv_gib, 0.25 * expected_kv_gib + 0.05);
  // The parts add up to the total shown (overhead is the residual, below zero if it must be).
  EXPECT_EQ(b.at("memory"), "gpu");
  int64_t parts = 0;
  for (const char* part : {"weights", "kv_cache", "activations", "overhead"})
    parts += b.at("components").at(part).at("bytes").get<int64_t>();
  EXPECT_EQ(parts, b.at("total_measured_bytes").get<int64_t>()) << b.dump(1);

  // manifest.json
  const json m = read_json(dir / "manifest.json");
  EXPECT_EQ(m.at("status"), "completed");
  EXPECT_EQ(m.at("run_id"), dir.filename().string());
  EXPECT_EQ(m.at("server").at("models")[0], "sim-model");
  EXPECT_TRUE(m.at("server").at("simulated").get<bool>());
  EXPECT_TRUE(m.at("gpus")[0].at("uuid").get<std::string>().starts_with("GPU-fake-0"));
  EXPECT_FALSE(m.at("configuration").at("api_key_set").get<bool>());
  EXPECT_EQ(m.at("configuration").at("read_interval_us"), 500);
}

TEST_F(ProfileE2E, BuiltInDefaultRunsTheSimulatorAndMatchesItsPlan) {
  // No --endpoint and no grid option: the built-in simulator on the small default grid, sized
  // exactly as planned (no engine jitter), so the pipeline must give the plan back.
  auto r = sys::run_command(
      {KVPROF_BIN, "profile", "--output-dir", (m_dir / "results").string(), "--baseline-s", "0.2",
       "--post-warmup-s", "0.1", "--sim-no-jitter", "--json", "-q"},
      env(false));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->exit_code, 0) << r->stderr_text;
  const json s = json::parse(r->stdout_text);
  EXPECT_TRUE(s.at("simulated").get<bool>());
  EXPECT_EQ(s.at("memory_source"), "simulated");
  EXPECT_EQ(s.at("model_info").at("name"), "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ(s.at("conditions").size(), 12U);  // 2 inputs x 3 concurrencies x 2 prefix modes
  std::map<std::string, double> err;
  for (const auto& row : s.at("estimate_comparison").at("rows")) {
    if (!row.at("error_pct").is_null()) err[row.at("component")] = row.at("error_pct");
  }
  // The simulator is sized by the plan: the server's blocks and the pool match it exactly.
  EXPECT_EQ(err.at("num_gpu_blocks"), 0.0);
  EXPECT_EQ(err.at("kv_cache_tokens"), 0.0);
  EXPECT_NEAR(err.at("kv_cache"), 0.0, 1e-9);
  EXPECT_NEAR(err.at("weights"), 0.0, 0.01);
  EXPECT_EQ(s.at("memory_breakdown").at("confidence_levels").at("overall"),
            "simulated (checks the measurement pipeline, not the planner)");
  EXPECT_TRUE(s.at("simulation").at("jitter").is_null());
}

TEST_F(ProfileE2E, EstimateWithEngineFlagsComparesWithThatPlan) {
  // serve-sim sized by the planner for Qwen2.5-7B on an H100; the profile is compared with the
  // plan the user asks for, once matching the server and once with a different utilization.
  sim::SimFlags flags;
  flags.model = "Qwen/Qwen2.5-7B-Instruct";
  flags.gpu = "H100";
  flags.port = 0;
  auto config = sim::sim_config_from_flags(flags);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_NE(config->sizing.find("vLLM estimate of Qwen/Qwen2.5-7B-Instruct"), std::string::npos);
  config->quiet = true;
  start_sim(*config);
  const auto blocks_error = [&](const std::string& flags_text) {
    auto r = sys::run_command(
        profile_args({"--input-lens", "128", "--concurrencies", "2", "--warmup-requests", "0",
                      "--estimate-with", flags_text, "--json"}),
        env(false));
    EXPECT_TRUE(r.has_value());
    if (!r) return -1.0;
    EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
    const json s = json::parse(r->stdout_text);
    EXPECT_EQ(s.at("estimate_comparison").at("estimate_flags"), flags_text);
    for (const auto& row : s.at("estimate_comparison").at("rows")) {
      if (row.at("component") == "num_gpu_blocks") return row.at("error_pct").get<double>();
    }
    return -1.0;
  };
  EXPECT_EQ(blocks_error("--gpu H100 -tp 1"), 0.0);
  EXPECT_LT(blocks_error("--gpu h100-sxm --gpu-memory-utilization 0.8"), -10.0);

  auto bad = sys::run_command(profile_args({"--estimate-with", "--no-such-flag 3"}), env(false));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->exit_code, 2);
  EXPECT_TRUE(bad->stderr_text.starts_with("kvprof: error: --estimate-with: ")) << bad->stderr_text;
  EXPECT_EQ(std::count(bad->stderr_text.begin(), bad->stderr_text.end(), '\n'), 1);
}

TEST_F(ProfileE2E, TheArchitectureFlagsGiveAPlanToCompareWith) {
  // The predecessor's command line: the model served ("sim-model") is not one kvprof can read, so
  // the architecture given describes it, and the run is compared with that plan.
  start_sim(small_sim());
  auto args =
      profile_args({"--input-lens", "64", "--concurrencies", "1", "--model-params", "8e9",
                    "--num-layers", "32", "--num-heads", "32", "--hidden-size", "4096", "--json"});
  args.erase(std::find(args.begin(), args.end(), "-q"));  // the warning is checked
  auto r = sys::run_command(args, env(false));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("the plan: 'sim-model' is not known to kvprof: planned from the "
                                "architecture given"),
            std::string::npos)
      << r->stderr_text;
  const json s = json::parse(r->stdout_text);
  ASSERT_TRUE(s.at("estimate_comparison").is_object()) << s.dump().substr(0, 2000);
  EXPECT_FALSE(s.at("estimate_comparison").at("rows").empty());
}

TEST_F(ProfileE2E, ServerDownIsOneLineErrorWithinFiveSeconds) {
  auto args = profile_args({});
  args[3] = "http://127.0.0.1:9";  // discard port: nothing listens
  const auto t0 = std::chrono::steady_clock::now();
  auto r = sys::run_command(args, env());
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_LT(elapsed, 5s);
  EXPECT_TRUE(r->stderr_text.starts_with("kvprof: error: cannot reach the server at "))
      << r->stderr_text;
  EXPECT_EQ(std::count(r->stderr_text.begin(), r->stderr_text.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(m_dir / "results"));
}

TEST_F(ProfileE2E, APasswordInTheEndpointUrlIsNeverWrittenNorPrinted) {
  start_sim(small_sim());
  auto args = profile_args({"--input-lens", "64", "--concurrencies", "1"});
  args.erase(std::find(args.begin(), args.end(), "-q"));  // the progress lines are checked too
  const std::string url = m_server->base_url();
  args[3] = "http://alice:sekrit@" + url.substr(url.find("//") + 2);
  auto r = sys::run_command(args, env());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_EQ(r->stdout_text.find("sekrit"), std::string::npos) << r->stdout_text;
  EXPECT_EQ(r->stderr_text.find("sekrit"), std::string::npos) << r->stderr_text;
  EXPECT_NE(r->stdout_text.find("alice:***@"), std::string::npos) << r->stdout_text;
  for (const auto& f : fs::recursive_directory_iterator(m_dir / "results")) {
    if (!f.is_regular_file()) continue;
    std::ifstream in(f.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text.find("sekrit"), std::string::npos) << f.path();
  }
  // A server that cannot be reached: the error line names the URL without its password.
  args[3] = "http://alice:sekrit@127.0.0.1:9/v1";
  r = sys::run_command(args, env());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->stderr_text.find("sekrit"), std::string::npos) << r->stderr_text;
}

TEST_F(ProfileE2E, AnOutputFolderNotInUtf8KeepsTheWholeRunAndItsReport) {
  start_sim(small_sim());
  auto args = profile_args({"--input-lens", "64", "--concurrencies", "1"});
  const fs::path out = m_dir / "caf\xe9";  // a Latin-1 name
  *std::find(args.begin(), args.end(), (m_dir / "results").string()) = out.string();
  auto r = sys::run_command(args, env());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_EQ(r->stderr_text.find("internal error"), std::string::npos) << r->stderr_text;
  const auto runs = test::run_folders(out);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_TRUE(fs::exists(runs[0] / "summary.json"));
  EXPECT_TRUE(fs::exists(runs[0] / "report.html"));
  fs::remove(runs[0] / "report.html");
  r = sys::run_command({KVPROF_BIN, "report", runs[0].string()}, env());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_TRUE(fs::exists(runs[0] / "report.html"));
}

TEST_F(ProfileE2E, FaultsEndEveryRequestInTheTraceAndExit3) {
  struct Case {
    const char* fault;       // as serve-sim's --fault-kind takes it
    const char* error_kind;  // what the trace must say
    const char* timeout_s;   // --request-timeout: short only where the fault is a stall, so a
                             // loaded machine's slow but sound answers do not time out
  };
  for (const Case& fc :
       {Case{"reset;after=2", "reset", "10"}, Case{"500", "http_5xx", "10"},
        Case{"429;seconds=1", "http_429", "10"}, Case{"malformed;after=1", "malformed_sse", "10"},
        Case{"stall;after=1;seconds=5", "timeout", "1"}}) {
    SCOPED_TRACE(fc.fault);
    if (m_server) m_server->stop();
    fs::remove_all(m_dir / "results");
    auto c = small_sim();
    c.fault = *sim::parse_fault_spec(fc.fault);
    c.fault_rate = 0.3;
    start_sim(c);
    auto r = sys::run_command(
        profile_args({"--input-lens", "128", "--concurrencies", "8", "--n-per-condition", "4",
                      "--warmup-requests", "0", "--request-timeout", fc.timeout_s}),
        env());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->exit_code, 3) << r->stderr_text;
    EXPECT_NE(r->stderr_text.find("requests failed"), std::string::npos) << r->stderr_text;
    const fs::path dir = run_dir();
    const auto trace = read_csv(dir / "request_trace.csv");
    ASSERT_EQ(trace.size(), 32U);  // every request ends in the trace
    size_t n_failed = 0;
    for (const auto& row : trace) {
      EXPECT_TRUE(row.at("status") == "ok" || row.at("status") == "error");
      if (row.at("status") == "error") {
        EXPECT_EQ(row.at("error_kind"), fc.error_kind) << row.at("error");
        EXPECT_FALSE(row.at("error").empty());
        ++n_failed;
      }
    }
    EXPECT_GT(n_failed, 0U);
    EXPECT_LT(n_failed, 32U);
    const json s = read_json(dir / "summary.json");
    EXPECT_EQ(s.at("requests").at("n_errors").get<size_t>(), n_failed);
    EXPECT_EQ(s.at("requests").at("errors_by_kind").at(fc.error_kind).get<size_t>(), n_failed);
    EXPECT_EQ(read_json(dir / "manifest.json").at("status"), "completed");
  }
}

TEST_F(ProfileE2E, MissingMetricsAndNvmlAreWarningsNotFailures) {
  auto c = small_sim();
  c.serve_metrics = false;
  start_sim(c);
  auto r = sys::run_command(
      profile_args({"--input-lens", "128", "--concurrencies", "2", "--warmup-requests", "0"}),
      env(false));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  const fs::path dir = run_dir();
  const json s = read_json(dir / "summary.json");
  EXPECT_EQ(s.at("memory_source"), "none");
  EXPECT_TRUE(s.at("memory_measurements").at("peak").is_null());
  bool nvml_warned = false, metrics_warned = false;
  for (const auto& w : s.at("warnings")) {
    const std::string text = w;
    nvml_warned |= text.find("GPU memory not sampled") != std::string::npos;
    metrics_warned |= text.find("metrics") != std::string::npos;
  }
  EXPECT_TRUE(nvml_warned) << s.at("warnings");
  EXPECT_TRUE(metrics_warned) << s.at("warnings");
  EXPECT_EQ(count_lines(dir / "gpu_mem_trace.csv"), 1U);  // the header
  EXPECT_EQ(read_csv(dir / "request_trace.csv").size(), 2U);
}

TEST_F(ProfileE2E, FullDiskIsOneErrorAndLeavesWholeRows) {
  // A 16 KiB file-size limit makes the GPU trace's writes fail (EFBIG) as a full disk would.
  auto c = small_sim();
  c.step_base_ms = 20;
  start_sim(c);
  auto args = profile_args({"--input-lens", "64", "--output-lens", "64", "--concurrencies", "1,2",
                            "--warmup-requests", "0"});
  args.insert(args.begin(), {"/bin/bash", "-c", "ulimit -f 16; exec \"$0\" \"$@\""});
  auto r = sys::run_command(args, env());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1) << r->stderr_text;
  EXPECT_TRUE(r->stderr_text.starts_with("kvprof: error: cannot write '")) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("gpu_mem_trace.csv': File too large"), std::string::npos);
  EXPECT_EQ(std::count(r->stderr_text.begin(), r->stderr_text.end(), '\n'), 1);
  const fs::path dir = run_dir();
  const auto gpu = read_csv(dir / "gpu_mem_trace.csv");  // every row whole (checked inside)
  EXPECT_GT(gpu.size(), 50U);
  EXPECT_LE(fs::file_size(dir / "gpu_mem_trace.csv"), 16U * 1024);
  for (const auto& row : read_csv(dir / "request_trace.csv")) {
    EXPECT_FALSE(row.at("status").empty());
  }
  EXPECT_EQ(read_json(dir / "manifest.json").at("status"), "failed");
}

TEST_F(ProfileE2E, CtrlCWritesAnInterruptedSummaryAndExits130) {
  auto c = small_sim();
  c.step_base_ms = 50;  // 20 tokens/s: the grid takes far longer than the test waits
  start_sim(c);
  auto o = env();
  std::thread killer;
  // Once the grid is under way (a request ended): Ctrl-C.
  sigint_after_trace_lines(o, killer, 2);
  auto r = sys::run_command(profile_args({"--input-lens", "64", "--output-lens", "64",
                                          "--concurrencies", "1,4", "--warmup-requests", "0"}),
                            o);
  killer.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 130) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("interrupted"), std::string::npos);
  const fs::path dir = run_dir();
  const json s = read_json(dir / "summary.json");
  EXPECT_TRUE(s.at("interrupted").get<bool>());
  EXPECT_EQ(read_json(dir / "manifest.json").at("status"), "interrupted");
  EXPECT_GE(s.at("requests").at("n_ok").get<size_t>(), 1U);
  EXPECT_LT(s.at("requests").at("n_ok").get<size_t>(), 5U);
  const auto trace = read_csv(dir / "request_trace.csv");
  EXPECT_EQ(trace.size(), s.at("requests").at("n_requests").get<size_t>());
}

TEST_F(ProfileE2E, CtrlCMidConditionReportsTheSameCountsEverywhere) {
  auto c = small_sim();
  c.step_base_ms = 50;  // 16 tokens: ~0.8 s per request
  start_sim(c);
  auto o = env();
  std::thread killer;
  // Ctrl-C once the first two requests of the first condition ended: two more are then in
  // flight and two not sent yet; the second condition never starts.
  sigint_after_trace_lines(o, killer, 3);
  auto args = profile_args({"--input-lens", "64,128", "--concurrencies", "2", "--n-per-condition",
                            "3", "--warmup-requests", "0"});
  args.erase(std::find(args.begin(), args.end(), "-q"));  // the progress lines are checked
  auto r = sys::run_command(args, o);
  killer.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 130) << r->stderr_text;
  const fs::path dir = run_dir();
  const json s = read_json(dir / "summary.json");
  EXPECT_TRUE(s.at("interrupted").get<bool>());
  ASSERT_EQ(s.at("conditions").size(), 1U) << "the second condition must not start";
  const json& cond = s.at("conditions").at(0);
  EXPECT_EQ(cond.at("status"), "interrupted");
  const auto n_ok = cond.at("n_ok").get<uint64_t>();
  const auto n_cancelled = cond.at("n_cancelled").get<uint64_t>();
  const auto n_not_sent = cond.at("n_not_sent").get<uint64_t>();
  EXPECT_EQ(cond.at("n_planned"), 6);
  EXPECT_GE(n_ok, 1U);
  EXPECT_GE(n_cancelled, 1U);
  EXPECT_GE(n_not_sent, 1U);
  EXPECT_EQ(n_ok + n_cancelled + n_not_sent + cond.at("n_errors").get<uint64_t>(), 6U);
  // The run's totals: the never-started condition's 6 requests are not sent either.
  const json& req = s.at("requests");
  EXPECT_EQ(req.at("n_planned"), 12);
  EXPECT_EQ(req.at("n_ok"), n_ok);
  EXPECT_EQ(req.at("n_not_sent"), n_not_sent + 6);

  // request_trace.csv: one row per sent request, the same statuses; a cancelled request keeps
  // its TTFT (when its first token came) but has no E2E; latency statistics are over the
  // completed rows.
  const auto trace = read_csv(dir / "request_trace.csv");
  EXPECT_EQ(trace.size(), n_ok + n_cancelled);
  std::vector<double> e2e_ok;
  uint64_t trace_cancelled = 0;
  for (const auto& row : trace) {
    if (row.at("status") == "ok") e2e_ok.push_back(num(row, "e2e_ms"));
    if (row.at("status") == "cancelled") {
      ++trace_cancelled;
      EXPECT_EQ(row.at("e2e_ms"), "");
      EXPECT_FALSE(row.at("end_unix_s").empty());
    }
  }
  EXPECT_EQ(e2e_ok.size(), n_ok);
  EXPECT_EQ(trace_cancelled, n_cancelled);
  EXPECT_EQ(cond.at("e2e_ms").at("n"), n_ok);
  EXPECT_NEAR(cond.at("e2e_ms").at("max").get<double>(),
              *std::max_element(e2e_ok.begin(), e2e_ok.end()), 0.01);
  EXPECT_GT(cond.at("ttft_ms").at("p50").get<double>(), 0.0);

  // The progress line says the same, and so do the table and the last line.
  const std::string line = fmt::format("kvprof: [1/2] in64_out16_c2_low: INTERRUPTED after ");
  const auto at = r->stderr_text.find(line);
  ASSERT_NE(at, std::string::npos) << r->stderr_text;
  const std::string end = r->stderr_text.substr(at, r->stderr_text.find('\n', at) - at);
  EXPECT_NE(end.find(fmt::format("{} of 6 completed, 0 failed, {} cancelled, {} not sent", n_ok,
                                 n_cancelled, n_not_sent)),
            std::string::npos)
      << end;
  EXPECT_EQ(r->stderr_text.find("2/2]"), std::string::npos) << r->stderr_text;
  EXPECT_EQ(r->stderr_text.find('\r'), std::string::npos) << "stderr is not a terminal";
  EXPECT_NE(r->stdout_text.find(fmt::format("in64_out16_c2_low (INTERRUPTED)")), std::string::npos)
      << r->stdout_text;
  EXPECT_NE(r->stdout_text.find(fmt::format(" {}/6 ", n_ok)), std::string::npos) << r->stdout_text;
  // Sent and planned are counted apart (a sent count with repeats is never set against the plan).
  const std::string totals = fmt::format(
      "{} of {} requests sent completed, 0 failed, {} cancelled; {} of the 12 planned not sent",
      n_ok, n_ok + n_cancelled, n_cancelled, n_not_sent + 6);
  EXPECT_NE(r->stdout_text.find("INTERRUPTED: " + totals), std::string::npos) << r->stdout_text;
  EXPECT_NE(r->stderr_text.find("interrupted; " + totals + "; everything measured is in"),
            std::string::npos)
      << r->stderr_text;
}

}  // namespace
}  // namespace kvprof
