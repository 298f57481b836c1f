// End-to-end: `kvprof profile --launch` starting serve-sim that prints real vLLM startup lines
// (startup timeline, engine figures in summary.json, the stop and the memory coming back), and the
// launches that fail — a command that dies at once, one that never answers, a port in use — each
// one line with the log's last lines, exit 1 and no process of the group left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/profile/launcher.hpp"
#include "kvprof/sim/sim_server.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/units.hpp"
#include "support/loopback_port.hpp"
#include "support/run_folders.hpp"
#include "support/temp_dir.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

class ProfileLaunch : public test::TempDirTest {
 protected:
  ProfileLaunch() : TempDirTest("kvprof_launch") {}

  sys::CommandResult profile(std::vector<std::string> extra) const {
    std::vector<std::string> args = {KVPROF_BIN,
                                     "profile",
                                     "--output-dir",
                                     (m_dir / "results").string(),
                                     "--baseline-s",
                                     "0.1",
                                     "--post-warmup-s",
                                     "0.1",
                                     "--min-condition-s",  // each request once: counts are exact
                                     "0",
                                     "--input-lens",
                                     "64",
                                     "--output-lens",
                                     "4",
                                     "--concurrencies",
                                     "2",
                                     "--prefix-modes",
                                     "low",
                                     "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = sys::run_command(args, options());
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  }

  // A kvprof run's options: 60 s, the fake NVML reading the simulated GPU's live file.
  sys::CommandOptions options() const {
    sys::CommandOptions o;
    o.timeout = 60s;
    o.env = {{"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
             {"KVPROF_FAKE_NVML_GPUS", "1"},
             {"KVPROF_FAKE_NVML_LIVE", (m_dir / "live.txt").string()},
             {"KVPROF_URL", ""},
             {"KVPROF_MODEL", ""}};
    return o;
  }

  // A real vLLM v0.19 startup (CodeLlama-7B on an H100) as a log file for serve-sim to print.
  fs::path vllm_startup_log() const {
    std::ifstream in(fs::path(KVPROF_FIXTURES_DIR) / "vllm_startup_public.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line);
      if (j.at("id") == "gt-047") {
        const fs::path path = m_dir / "vllm_startup.log";
        std::ofstream(path) << j.at("quote").get<std::string>() << "\n";
        return path;
      }
    }
    ADD_FAILURE() << "gt-047 not in the fixture";
    return {};
  }

  // The pid a launched shell wrote to `name` (its process group id).
  pid_t written_pid(const std::string& name) const {
    std::ifstream in(m_dir / name);
    pid_t pid = 0;
    in >> pid;
    return pid;
  }

  // True when no process of group `pgid` is left.
  static bool group_gone(pid_t pgid) { return ::kill(-pgid, 0) != 0 && errno == ESRCH; }

  fs::path run_dir() const { return test::first_run_folder(m_dir / "results"); }
};

TEST_F(ProfileLaunch, ServeSimPrintingVllmLinesHasAStartupTimelineAndEngineFigures) {
  const std::string command = std::string(KVPROF_BIN) +
                              " serve-sim --model {model} --gpu H100 --host {host} --port {port} "
                              "--max-num-seqs {max_concurrency} --startup-line-delay-ms 40 "
                              "--tokens-per-s 20 --startup-log " +
                              vllm_startup_log().string() + " --live-state " +
                              (m_dir / "live.txt").string() + " --api-key s3cret-key";
  // 20 tokens/s: the one condition lasts about 200 ms, long enough for the GPU sampler (every
  // 20 ms) to see it even on a loaded machine; a shorter one can fall between two readings.
  auto r =
      profile({"--launch", command, "--model", "sim-llama", "--api-key", "s3cret-key", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = json::parse(r.stdout_text);
  const json& l = s.at("launch");
  EXPECT_NE(l.at("command").get<std::string>().find("--max-num-seqs 2 "), std::string::npos);
  EXPECT_NE(l.at("command").get<std::string>().find("--model sim-llama "), std::string::npos);
  EXPECT_GT(l.at("ready_s").get<double>(), 0.3);  // 9 lines, 40 ms apart

  // The four phases, in order, each ended by its line, with the simulated memory growing.
  std::vector<std::string> names;
  double last_end = 0;
  uint64_t last_used = 0;
  for (const auto& p : l.at("phases")) {
    names.push_back(p.at("phase"));
    EXPECT_GE(p.at("end_s").get<double>(), last_end);
    EXPECT_LE(p.at("begin_s").get<double>(), p.at("end_s").get<double>());
    last_end = p.at("end_s");
    const uint64_t used = p.at("gpu_used_bytes_at_end");
    EXPECT_GE(used, last_used) << p;
    last_used = used;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"weight_loading", "profile_run", "kv_allocation",
                                             "cuda_graph_capture"}));
  const json& phases = l.at("phases");
  EXPECT_NE(phases[0].at("line").get<std::string>().find("Model loading took 12.56 GiB"),
            std::string::npos);
  EXPECT_EQ(phases[0].at("line_no"), 3);
  EXPECT_GE(phases[0].at("gpu_used_bytes_at_end").get<uint64_t>(), 15ULL << 30);  // sim weights
  EXPECT_GT(phases[2].at("gpu_used_bytes_at_end").get<uint64_t>(), 60ULL << 30);  // + KV pool

  // Stopped with SIGTERM, the group gone, the memory back.
  EXPECT_TRUE(l.at("stop").at("was_running").get<bool>());
  EXPECT_FALSE(l.at("stop").at("killed_after_grace").get<bool>());
  EXPECT_TRUE(l.at("stop").at("process_group_gone").get<bool>());
  EXPECT_TRUE(l.at("memory_released").get<bool>());
  EXPECT_TRUE(group_gone(l.at("pid").get<pid_t>()));

  // The engine's own figures, beside the measurement.
  const json& e = s.at("engine_reported");
  EXPECT_EQ(e.at("engine"), "vllm");
  EXPECT_EQ(e.at("source"), "server.log");
  const json& c = e.at("components");
  EXPECT_EQ(c.at("weights").at("confidence"), "reported by engine");
  EXPECT_NEAR(c.at("weights").at("bytes").get<double>() / k_gib, 12.56, 0.005);
  EXPECT_NEAR(c.at("kv_cache").at("bytes").get<double>() / k_gib, 61.66, 0.005);
  EXPECT_NEAR(c.at("cuda_graph").at("bytes").get<double>() / k_gib, 0.89, 0.005);
  EXPECT_NEAR(c.at("activation_peak").at("bytes").get<double>() / k_gib, 0.77, 0.005);
  EXPECT_FALSE(s.at("memory_breakdown").is_null());
  EXPECT_EQ(s.at("requests").at("n_ok"), 2);

  // server.log holds everything it printed; the host memory of the launched pid was sampled.
  const fs::path dir = run_dir();
  std::ifstream log(dir / "server.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Graph capturing finished in 4 secs, took 0.89 GiB"), std::string::npos);
  EXPECT_NE(text.find("serve-sim (SIMULATED vllm engine) listening on"), std::string::npos);
  EXPECT_EQ(s.at("host_memory").at("pid"), l.at("pid"));
  EXPECT_EQ(s.at("files").at("server_log"), "server.log");

  // The key reached the server, but no file kvprof wrote records it.
  EXPECT_NE(l.at("command").get<std::string>().find("--api-key ***"), std::string::npos);
  for (const char* name : {"summary.json", "manifest.json"}) {
    std::ifstream f(dir / name);
    const std::string body((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(body.find("s3cret-key"), std::string::npos) << name;
  }
}

TEST_F(ProfileLaunch, CommandThatDiesAtOnceIsOneLineWithItsLastLines) {
  // It leaves a child behind in its group: kvprof must end that one too.
  const std::string command = "echo $$ > " + (m_dir / "pid").string() +
                              "; sleep 30 & echo loading; echo 'fatal: no CUDA device' >&2; exit 3";
  auto r = profile({"--launch", command, "--launch-timeout", "20"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("the launched server exited with code 3 after"), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("last lines of server.log: \"loading\" | \"fatal: no CUDA device\""),
            std::string::npos)
      << r.stderr_text;
  const pid_t pgid = written_pid("pid");
  ASSERT_GT(pgid, 0);
  EXPECT_TRUE(group_gone(pgid)) << "the group's sleep outlived kvprof";
  EXPECT_TRUE(fs::exists(run_dir() / "server.log"));
}

TEST_F(ProfileLaunch, ServerThatNeverAnswersIsStoppedAfterTheTimeout) {
  // It ignores SIGTERM (so does its child): the grace period ends in SIGKILL.
  const std::string command = "trap '' TERM; echo $$ > " + (m_dir / "pid").string() +
                              "; echo 'waiting for nothing'; sleep 60; sleep 60";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = profile({"--launch", command, "--launch-timeout", "1", "--launch-grace", "0.3"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("did not answer"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("within 1 s (--launch-timeout); last lines of server.log: \"waiting "
                               "for nothing\""),
            std::string::npos)
      << r.stderr_text;
  const pid_t pgid = written_pid("pid");
  ASSERT_GT(pgid, 0);
  EXPECT_TRUE(group_gone(pgid));
}

TEST_F(ProfileLaunch, CtrlCDuringStartupKeepsTheTimelineSoFarAndExits130) {
  // serve-sim prints the vLLM startup slowly (300 ms a line); Ctrl-C comes before it listens.
  const std::string command = std::string(KVPROF_BIN) +
                              " serve-sim --model {model} --gpu H100 --host {host} --port {port} "
                              "--startup-line-delay-ms 300 --startup-log " +
                              vllm_startup_log().string() + " --live-state " +
                              (m_dir / "live.txt").string();
  std::vector<std::string> args = {"--launch", command, "--model", "sim-llama"};
  sys::CommandOptions o;
  o.timeout = 60s;
  o.env = {{"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
           {"KVPROF_FAKE_NVML_GPUS", "1"},
           {"KVPROF_FAKE_NVML_LIVE", (m_dir / "live.txt").string()}};
  // Ctrl-C once the log says the weights are loaded (line 3), whatever the machine's load.
  const fs::path results = m_dir / "results";
  o.on_spawn = [results](pid_t pid) {
    std::thread([pid, results] {
      for (int i = 0; i < 600; ++i) {
        std::error_code ec;
        for (const auto& run : fs::directory_iterator(results, ec)) {
          std::ifstream log(run.path() / "server.log");
          const std::string text((std::istreambuf_iterator<char>(log)), {});
          if (text.find("Model loading took") != std::string::npos) {
            ::kill(pid, SIGINT);
            return;
          }
        }
        std::this_thread::sleep_for(50ms);
      }
      ::kill(pid, SIGINT);
    }).detach();
  };
  std::vector<std::string> argv = {KVPROF_BIN, "profile", "--output-dir",
                                   (m_dir / "results").string(), "-q"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = sys::run_command(argv, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 130) << r->stderr_text;
  EXPECT_EQ(std::count(r->stderr_text.begin(), r->stderr_text.end(), '\n'), 1) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("interrupted while the launched server was starting"),
            std::string::npos)
      << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("startup timeline in"), std::string::npos) << r->stderr_text;

  const fs::path dir = run_dir();
  std::ifstream in(dir / "summary.json");
  ASSERT_TRUE(in.good()) << "no summary.json in " << dir;
  const json s = json::parse(in);
  EXPECT_TRUE(s.at("interrupted").get<bool>());
  EXPECT_EQ(s.at("status"), "interrupted");
  const json& l = s.at("launch");
  EXPECT_TRUE(l.at("ready_s").is_null());
  ASSERT_GE(l.at("phases").size(), 1U);
  EXPECT_EQ(l.at("phases")[0].at("phase"), "weight_loading");
  EXPECT_GE(l.at("phases")[0].at("gpu_used_bytes_at_end").get<uint64_t>(), 15ULL << 30);
  EXPECT_TRUE(l.at("stop").at("process_group_gone").get<bool>());
  EXPECT_TRUE(group_gone(l.at("pid").get<pid_t>()));
  EXPECT_EQ(s.at("engine_reported").at("components").at("weights").at("confidence"),
            "reported by engine");
  EXPECT_TRUE(fs::exists(dir / "server.log"));
  EXPECT_GT(fs::file_size(dir / "gpu_mem_trace.csv"), 100U);
}

TEST_F(ProfileLaunch, EngineLinesThatAreNotUtf8StillGiveASummary) {
  // Every startup line ends in a progress-bar block and a stray byte (0xff): the run's JSON files
  // need valid UTF-8, so the lines handed on carry U+FFFD where server.log keeps the bytes.
  std::ifstream in(vllm_startup_log());
  const fs::path log = m_dir / "garbled.log";
  std::ofstream out(log, std::ios::binary);
  for (std::string line; std::getline(in, line);)
    out << line << " \xe2\x96\x88\xff\n";
  out.close();
  const std::string command = std::string(KVPROF_BIN) +
                              " serve-sim --model {model} --gpu H100 --host {host} --port {port} "
                              "--startup-line-delay-ms 0 --tokens-per-s 200 --startup-log " +
                              log.string() + " --live-state " + (m_dir / "live.txt").string();
  auto r = profile({"--launch", command, "--model", "sim-llama", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = json::parse(r.stdout_text);
  const json& phases = s.at("launch").at("phases");
  ASSERT_EQ(phases.size(), 4U) << phases;
  EXPECT_NE(phases[0].at("line").get<std::string>().find(" \xe2\x96\x88\xef\xbf\xbd"),
            std::string::npos)
      << phases[0];
  EXPECT_TRUE(fs::exists(run_dir() / "summary.json"));
  std::ifstream server_log(run_dir() / "server.log", std::ios::binary);
  const std::string kept((std::istreambuf_iterator<char>(server_log)), {});
  EXPECT_NE(kept.find("\xe2\x96\x88\xff\n"), std::string::npos);
}

TEST_F(ProfileLaunch, ReadyComesAfterEveryLinePrintedBeforeTheAnswer) {
  // serve-sim prints a startup log at full speed and then listens; the reader hands lines over
  // slowly (120 ms each, as on a loaded machine). wait_ready() must not say "ready" while lines
  // printed before the answer are still unread: the startup timeline is built from them.
  const fs::path log = vllm_startup_log();
  std::ifstream in(log);
  const auto printed = static_cast<size_t>(
      std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
  ASSERT_GE(printed, 5U);
  test::LoopbackPort free_port(/*listen=*/false);
  ASSERT_TRUE(free_port.ok());
  free_port.close();
  const std::string port = free_port.port_text();
  std::atomic<size_t> handed{0};
  auto server = profile::LaunchedServer::start(
      std::string(KVPROF_BIN) + " serve-sim --model m --gpu H100 --host 127.0.0.1 --port " + port +
          " --startup-line-delay-ms 0 --startup-log " + log.string(),
      m_dir / "server.log", [&handed](const profile::LogLine&) {
        std::this_thread::sleep_for(120ms);
        ++handed;
      });
  ASSERT_TRUE(server.has_value()) << server.error().message;
  const auto ready = (*server)->wait_ready("http://127.0.0.1:" + port, {}, 30, nullptr);
  ASSERT_TRUE(ready.has_value()) << ready.error().message;
  EXPECT_GE(handed.load(), printed);
  (*server)->stop(2.0);
}

TEST_F(ProfileLaunch, PortInUseStartsNothing) {
  test::LoopbackPort taken(/*listen=*/true);
  ASSERT_TRUE(taken.ok());
  const std::string port = taken.port_text();
  const fs::path marker = m_dir / "started";
  auto r = profile({"--launch", "touch " + marker.string(), "--launch-port", port});
  taken.close();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("port " + port + " on 127.0.0.1 is already in use (by pid " +
                               std::to_string(::getpid()) + ")"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_FALSE(fs::exists(m_dir / "results"));
}

TEST_F(ProfileLaunch, PlaceholdersAreCheckedBeforeAnythingStarts) {
  auto r = profile({"--launch", "serve {model} --port {port}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--launch uses {model} but it has no value: pass --model"),
            std::string::npos)
      << r.stderr_text;
  r = profile({"--launch", "serve {port}", "--server-log", vllm_startup_log().string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--server-log and --launch do not go together"), std::string::npos)
      << r.stderr_text;
  r = profile({"--launch", "serve --port {prot}", "--model", "m"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("unknown placeholder {prot}"), std::string::npos) << r.stderr_text;

  auto filled = profile::fill_placeholders(
      "a {model} {port}{host} {max_concurrency}",
      {{"model", "m"}, {"port", "80"}, {"host", "h"}, {"max_concurrency", "4"}});
  ASSERT_TRUE(filled.has_value());
  EXPECT_EQ(*filled, "a m 80h 4");
}

// What a value reads as once /bin/sh has parsed `command` (printf prints each word on a line).
std::string through_shell(const std::string& command) {
  auto r = sys::run_command({"/bin/sh", "-c", command}, {});
  EXPECT_TRUE(r.has_value());
  return r ? r->stdout_text : std::string();
}

TEST(FillPlaceholders, EveryValueReachesTheShellAsTheWordsItWas) {
  const std::vector<std::string> hostile = {"x;touch /nonexistent/kvprof-pwned;echo",
                                            "two words",
                                            "it's",
                                            "$(id -u)",
                                            "`id -u`",
                                            "\"quoted\"",
                                            "back\\slash",
                                            "*",
                                            "~",
                                            "a'b\"c$d`e\\f",
                                            "--flag=1|cat",
                                            "plain-name_1.0"};
  for (const auto& v : hostile) {
    for (const std::string tmpl :
         {"printf '%s\\n' {model}", "printf '%s\\n' '{model}'", "printf '%s\\n' \"{model}\"",
          "printf '%s\\n' \"pre {model} post\""}) {
      auto filled = profile::fill_placeholders(tmpl, {{"model", v}});
      ASSERT_TRUE(filled.has_value()) << filled.error().message;
      const bool wrapped = tmpl.find("pre ") != std::string::npos;
      EXPECT_EQ(through_shell(*filled), (wrapped ? "pre " + v + " post" : v) + "\n")
          << tmpl << " -> " << *filled;
    }
  }
  // A list of words: each stays one word.
  auto filled = profile::fill_placeholders(
      "printf '%s\\n' {engine_args}", {},
      {{"engine_args", {"--quantization", "awq;touch /nonexistent/x", "--dtype", "a b"}}});
  ASSERT_TRUE(filled.has_value());
  EXPECT_EQ(through_shell(*filled), "--quantization\nawq;touch /nonexistent/x\n--dtype\na b\n");

  // Control characters are refused, not passed on.
  for (const std::string& bad :
       std::vector<std::string>{"x\ntouch /tmp/y", "x\r", std::string("x\0y", 3), "x\x1b[2J"}) {
    auto r = profile::fill_placeholders("serve {model}", {{"model", bad}});
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("{model} holds a control character"), std::string::npos)
        << r.error().message;
  }
  // Braces around anything but a name are the command's own (a JSON argument).
  filled = profile::fill_placeholders(
      "vllm serve {model} --kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\"}'",
      {{"model", "m"}});
  ASSERT_TRUE(filled.has_value()) << filled.error().message;
  EXPECT_EQ(*filled,
            "vllm serve m --kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\"}'");
  EXPECT_EQ(profile::placeholder_names("a {model} '{\"x\": 1}' {port}{host} {"),
            (std::vector<std::string>{"model", "port", "host"}));
}

TEST_F(ProfileLaunch, AHostileModelNameRunsNothing) {
  const fs::path marker = m_dir / "pwned";
  const std::string model = "x;touch " + marker.string() + ";echo";
  // The "server" prints the model it was given and exits: the value arrived as one word.
  auto r = profile({"--model", model, "--launch", "printf 'model=%s\\n' {model}; exit 3",
                    "--launch-timeout", "20"});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_FALSE(fs::exists(marker)) << "the model name ran as a command";
  EXPECT_NE(r.stderr_text.find("\"model=" + model + "\""), std::string::npos) << r.stderr_text;

  r = profile({"--model", "x\n;touch " + marker.string(), "--launch", "serve {model}"});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("holds a control character"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(fs::exists(marker));
}

// True when a process of group `pgid` still runs. Zombies do not count: once kvprof (their
// subreaper) is gone they wait for init, which in a container may never reap them.
bool group_runs(pid_t pgid) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const auto group = sys::parse_proc_stat_pgrp(stat);
    const size_t close = stat.rfind(") ");
    if (group && *group == pgid && close != std::string::npos && close + 2 < stat.size() &&
        stat[close + 2] != 'Z') {
      return true;
    }
  }
  return false;
}

// kvprof killed (SIGKILL) or hung up on (SIGHUP) while it profiles a launched server whose
// processes are not all the shell (the shell forks the server and waits): no process of the
// server's group may outlive it. A hang-up is a stop like Ctrl-C: the summary is written.
TEST_F(ProfileLaunch, AKilledOrHungUpProfileTakesItsServerWithIt) {
  for (const int signo : {SIGKILL, SIGHUP}) {
    SCOPED_TRACE(::strsignal(signo));
    fs::remove_all(m_dir / "results");
    fs::remove(m_dir / "pid");
    const std::string command = "echo $$ > " + (m_dir / "pid").string() + "; " +
                                std::string(KVPROF_BIN) +
                                " serve-sim --model {model} --gpu H100 --host {host} --port "
                                "{port} --live-state " +
                                (m_dir / "live.txt").string() + "; echo the server ended";
    sys::CommandOptions o = options();
    // The signal once the server has answered and the grid runs (a request trace appears).
    const fs::path results = m_dir / "results";
    o.on_spawn = [results, signo](pid_t pid) {
      std::thread([pid, results, signo] {
        for (int i = 0; i < 1200; ++i) {
          std::error_code ec;
          for (const auto& run : fs::directory_iterator(results, ec)) {
            if (fs::exists(run.path() / "request_trace.csv", ec)) {
              std::this_thread::sleep_for(200ms);
              ::kill(pid, signo);
              return;
            }
          }
          std::this_thread::sleep_for(25ms);
        }
        ::kill(pid, signo);
      }).detach();
    };
    auto r = sys::run_command(
        {KVPROF_BIN, "profile", "--output-dir", results.string(), "-q", "--model", "sim-llama",
         "--launch", command, "--input-lens", "256", "--output-lens", "256", "--concurrencies",
         "1,2,4,8", "--baseline-s", "0.1", "--post-warmup-s", "0.1"},
        o);
    ASSERT_TRUE(r.has_value());
    const pid_t pgid = written_pid("pid");
    ASSERT_GT(pgid, 0);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {  // the watchdog's grace is 5 s
      gone = !group_runs(pgid);
      if (!gone) std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(gone) << "the server's group outlived kvprof";
    if (signo == SIGHUP) {
      EXPECT_EQ(r->exit_code, 130) << r->stderr_text;
      std::ifstream in(run_dir() / "summary.json");
      ASSERT_TRUE(in.good()) << "no summary.json after SIGHUP";
      const json summary = json::parse(in);
      EXPECT_TRUE(summary.at("interrupted").get<bool>());
      EXPECT_TRUE(summary.at("launch").at("stop").at("process_group_gone").get<bool>());
    } else {
      ::kill(-pgid, SIGKILL);  // a failed check leaves nothing behind either
    }
  }
}

TEST_F(ProfileLaunch, ServerLogOfAServerStartedElsewhereGoesIntoTheSummary) {
  sim::SimConfig c;
  c.model = "sim-model";
  c.num_gpu_blocks = 512;
  c.max_model_len = 2048;
  c.quiet = true;
  auto server = sim::SimServer::start(c);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  auto r = profile({"--endpoint", (*server)->base_url(), "--server-log",
                    vllm_startup_log().string(), "--warmup-requests", "0", "--json"});
  (*server)->stop();
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = json::parse(r.stdout_text);
  EXPECT_TRUE(s.at("launch").is_null());
  const json& e = s.at("engine_reported");
  EXPECT_EQ(e.at("source"), (m_dir / "vllm_startup.log").string());
  EXPECT_EQ(e.at("components").at("weights").at("confidence"), "reported by engine");
  EXPECT_EQ(e.at("settings").at("num_gpu_blocks").at("value"), 7891);
}

}  // namespace
}  // namespace kvprof
