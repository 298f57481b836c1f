// `kvprof requests` end to end against serve-sim: the progress on stderr is the one `profile`
// shows (a line per condition with its counts, the grid's requests and the ETA; plain lines when
// piped, no colour), the table on stdout, and every request in request_trace.csv.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "support/run_kvprof.hpp"
#include "support/serve_process.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;

TEST(CliRequests, ProgressIsAPlainLinePerConditionWithTheGridAndItsEta) {
  const fs::path dir =
      fs::temp_directory_path() / ("kvprof-requests-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  test::ServeProcess sim({"--model", "Qwen/Qwen2.5-0.5B-Instruct", "--gpu", "H100", "--port", "0"},
                         "serve-sim");
  ASSERT_GT(sim.port(), 0) << sim.first_line();
  const fs::path workload = dir / "workload.jsonl";
  const auto w = test::run_kvprof("workload -o " + workload.string() +
                                  " --input-lens 32,64 --output-lens 4 --concurrencies 1,3 "
                                  "--prefix-modes low");
  ASSERT_EQ(w.rc, 0) << w.out;
  const fs::path trace = dir / "trace.csv";
  const auto r =
      test::run_kvprof("requests " + workload.string() + " -o " + trace.string() + " --endpoint " +
                       sim.url() + "/v1 --model Qwen/Qwen2.5-0.5B-Instruct");
  ASSERT_EQ(r.rc, 0) << r.out;
  // Four conditions, 1 + 3 + 1 + 3 = 8 requests: one line each, the grid's count growing.
  const std::regex line(R"(kvprof: \[(\d)/4\] (in\d+_out4_c\d_low): (\d)/(\d) ok, 0 errors, )"
                        R"([\d.]+ s; grid (\d)/8, ETA [^\n]+)");
  uint32_t n = 0, done = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line);
       it != std::sregex_iterator(); ++it) {
    ++n;
    EXPECT_EQ(std::stoul((*it)[1]), n) << (*it)[0];
    EXPECT_EQ((*it)[3], (*it)[4]) << (*it)[0];
    done += std::stoul((*it)[3]);
    EXPECT_EQ(std::stoul((*it)[5]), done) << (*it)[0];
  }
  EXPECT_EQ(n, 4u) << r.out;
  EXPECT_EQ(done, 8u);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "colour in piped output";
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "a rewritten line in piped output";
  EXPECT_NE(r.out.find("trace: " + trace.string()), std::string::npos) << r.out;
  std::ifstream in(trace);
  size_t rows = 0;
  for (std::string l; std::getline(in, l);)
    ++rows;
  EXPECT_EQ(rows, 9u);  // header + 8 requests
  // -q: no progress at all.
  const auto quiet =
      test::run_kvprof("requests -q " + workload.string() + " -o " + trace.string() +
                       " --endpoint " + sim.url() + "/v1 --model Qwen/Qwen2.5-0.5B-Instruct");
  ASSERT_EQ(quiet.rc, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("kvprof: ["), std::string::npos) << quiet.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvprof
