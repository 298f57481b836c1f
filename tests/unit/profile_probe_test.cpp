// End-to-end: the probe of `kvprof profile` before the grid, against serve-sim in this process
// playing each case (a wrong path, a missing or wrong API key, a model it does not serve, token-ID
// prompts refused as llama.cpp refuses them, a max context shorter than the grid, every warmup
// request failing): one clear line and the right exit code, nothing written, nothing else sent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvprof/profile/endpoint_check.hpp"
#include "kvprof/sim/sim_server.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/workload/workload_io.hpp"
#include "support/run_folders.hpp"
#include "support/sim_server_test.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

class ProfileProbe : public test::SimServerTest {
 protected:
  ProfileProbe() : SimServerTest("kvprof_probe") {}

  void start_sim(const std::function<void(sim::SimConfig&)>& tweak = {}) {
    sim::SimConfig c;
    c.model = "sim-model";
    c.num_gpu_blocks = 1024;
    c.max_model_len = 2048;
    c.step_base_ms = 1.0;
    c.quiet = true;
    if (tweak) tweak(c);
    start_server(c);
  }

  // `kvprof profile` against the simulator (or `endpoint`), a tiny grid.
  sys::CommandResult profile(std::vector<std::string> extra, const std::string& endpoint = "") {
    std::vector<std::string> args = {
        KVPROF_BIN,          "profile",
        "--endpoint",        endpoint.empty() ? m_server->base_url() : endpoint,
        "--output-dir",      (m_dir / "results").string(),
        "--baseline-s",      "0.05",
        "--post-warmup-s",   "0.05",
        "--input-lens",      "64",
        "--output-lens",     "4",
        "--concurrencies",   "2",
        "--prefix-modes",    "low",
        "--min-condition-s", "0",  // each request once: counts are exact
        "--no-host-mem"};
    args.insert(args.end(), extra.begin(), extra.end());
    sys::CommandOptions o;
    o.timeout = 60s;
    o.env = {{"KVPROF_NVML_LIBRARY", (m_dir / "absent.so").string()},
             {"KVPROF_URL", ""},
             {"KVPROF_MODEL", ""},
             {"OPENAI_API_KEY", ""}};
    auto r = sys::run_command(args, o);
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  }

  // The one error line; checks that there is exactly one line and nothing was sent or written
  // after the probe.
  std::string one_error_line(const sys::CommandResult& r, uint64_t max_completions) const {
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
    EXPECT_TRUE(r.stderr_text.starts_with("kvprof: error: ")) << r.stderr_text;
    EXPECT_FALSE(fs::exists(m_dir / "results")) << "a run folder was written";
    EXPECT_LE(m_server->stats().completion_requests_total, max_completions);
    return r.stderr_text;
  }
};

TEST_F(ProfileProbe, WrongPathIs404WithTheServersMessage) {
  start_sim();
  const std::string wrong = "http://127.0.0.1:" + std::to_string(m_server->port()) + "/api/v1";
  auto r = profile({"--model", "sim-model", "-q"}, wrong);
  EXPECT_EQ(r.exit_code, 1);
  const auto line = one_error_line(r, 0);
  EXPECT_NE(line.find("answered 404: Not Found"), std::string::npos) << line;
  EXPECT_NE(line.find("/api/v1/completions"), std::string::npos) << line;
  EXPECT_NE(line.find("check the path of --endpoint"), std::string::npos) << line;

  // Without --model the model list is what fails first, with its status.
  r = profile({"-q"}, wrong);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(one_error_line(r, 0).find("/api/v1/models answered 404"), std::string::npos);
}

TEST_F(ProfileProbe, MissingOrWrongApiKeyIs401) {
  start_sim([](sim::SimConfig& c) { c.api_key = "sekret"; });
  auto r = profile({"-q"});
  EXPECT_EQ(r.exit_code, 1);
  auto line = one_error_line(r, 0);
  EXPECT_NE(line.find("answered 401: Unauthorized"), std::string::npos) << line;
  EXPECT_NE(line.find("--api-key"), std::string::npos) << line;

  r = profile({"--api-key", "wrong", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  line = one_error_line(r, 0);
  EXPECT_NE(line.find("refused the API key"), std::string::npos) << line;

  r = profile({"--api-key", "sekret", "--warmup-requests", "0", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
}

TEST_F(ProfileProbe, ModelTheServerDoesNotServeIsABadSetting) {
  start_sim();
  auto r = profile({"--model", "sim-modle", "-q"});
  EXPECT_EQ(r.exit_code, 2);
  const auto line = one_error_line(r, 0);
  EXPECT_NE(line.find("--model 'sim-modle' is not served"), std::string::npos) << line;
  EXPECT_NE(line.find("did you mean 'sim-model'"), std::string::npos) << line;
}

TEST_F(ProfileProbe, GridLongerThanTheMaxContextIsABadSetting) {
  start_sim();
  auto r = profile({"--input-lens", "2040,64", "--output-lens", "16", "-q"});
  EXPECT_EQ(r.exit_code, 2);
  const auto line = one_error_line(r, 0);
  EXPECT_NE(line.find("needs 2056 tokens (2040 in + 16 out)"), std::string::npos) << line;
  EXPECT_NE(line.find("max context is 2048 (max_model_len in /v1/models)"), std::string::npos)
      << line;
}

TEST_F(ProfileProbe, TokenPromptsRefusedSwitchToTextWithOneWarning) {
  start_sim([](sim::SimConfig& c) { c.reject_token_prompts = true; });
  auto r = profile({"--warmup-requests", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = json::parse(r.stdout_text);
  EXPECT_EQ(s.at("requests").at("n_ok"), 2);
  std::vector<std::string> warned;
  for (const auto& w : s.at("warnings")) {
    if (w.get<std::string>().find("token-ID prompts") != std::string::npos) warned.push_back(w);
  }
  ASSERT_EQ(warned.size(), 1U) << s.at("warnings");
  EXPECT_NE(warned[0].find("\"prompt\" must be a string"), std::string::npos) << warned[0];
  EXPECT_NE(warned[0].find("token counts by /tokenize: 64 -> "), std::string::npos) << warned[0];
  EXPECT_NE(r.stderr_text.find("kvprof: warning: the server refuses token-ID prompts"),
            std::string::npos);
  // The workload on disk is the text one that ran: its generator says so, and reading it back
  // gives text prompts.
  const fs::path dir = test::first_run_folder(m_dir / "results");
  std::ifstream generator(dir / "workload.generator.json");
  std::string first;
  std::getline(generator, first);
  EXPECT_EQ(json::parse(first).at("generator").at("prompt_format"), "text") << first;
  const auto back = workload::read_workload(dir / "workload.jsonl");
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->front().prompt_format, workload::PromptFormat::text);
  EXPECT_FALSE(back->front().prompt_text.empty());
}

TEST_F(ProfileProbe, EveryWarmupRequestFailingStopsBeforeTheGrid) {
  // The probe (not streamed, one token) passes; every streamed warmup request breaks.
  start_sim([](sim::SimConfig& c) {
    c.fault = *sim::parse_fault_spec("malformed;after=1");
    c.fault_rate = 1.0;
  });
  auto r = profile({"--warmup-requests", "2", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("every warmup request failed (2 of 2), the grid was not run: "),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(m_server->stats().completion_requests_total, 3U);  // probe + 2 warmup
  const fs::path dir = test::first_run_folder(m_dir / "results");
  std::ifstream manifest(dir / "manifest.json");
  EXPECT_EQ(json::parse(manifest).at("status"), "failed");
}

TEST(ServerMessage, ReadsEveryCommonErrorShape) {
  using profile::server_message;
  EXPECT_EQ(server_message(R"({"error":{"message":"bad\nthing","code":400}})"), "bad");
  EXPECT_EQ(server_message(R"({"error":"Unauthorized"})"), "Unauthorized");
  EXPECT_EQ(server_message(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(server_message(R"({"message":"nope"})"), "nope");
  EXPECT_EQ(server_message("plain text\nmore"), "plain text");
  EXPECT_EQ(server_message(""), "");
  EXPECT_EQ(server_message(std::string(1000, 'x')).size(), 303U);
}

}  // namespace
}  // namespace kvprof
