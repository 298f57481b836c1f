// summary.json of real profile runs against docs/summary-schema.md, both ways: every field a run
// writes is documented with its type, and every documented field is written by one of the runs
// (serve-sim launched with known limits and vLLM startup lines; the built-in simulator with a
// llama.cpp log). The same launched run checks the derived answers against the limits it was
// started with, and the readers of run folders are checked on a run written with schema 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kvprof/results/history_db.hpp"
#include "kvprof/results/history_entries.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// The limits serve-sim is launched with, and the grid run against it.
constexpr uint32_t k_max_num_seqs = 4;
constexpr uint32_t k_num_gpu_blocks = 80;
constexpr uint32_t k_block_size = 16;
constexpr uint32_t k_output_len = 8;
const std::vector<uint32_t> k_input_lens{64, 512};
const std::vector<uint32_t> k_concurrencies{2, 4, 8};

// One documented field: its path ("a.b[].c", "a.*" for any key of a map) and type text.
struct DocField {
  std::string type;
  std::string meaning;
};

// The rows of the tables in `markdown` whose header's first cell is `first_header`, by path.
std::map<std::string, DocField> documented_fields(const std::string& markdown,
                                                  const std::string& first_header) {
  std::map<std::string, DocField> out;
  std::istringstream in(markdown);
  std::string line;
  bool in_table = false;
  const std::regex row(R"(^\|\s*`([^`]+)`\s*\|([^|]*)\|([^|]*)\|(.*)\|\s*$)");
  while (std::getline(in, line)) {
    if (!line.starts_with("|")) {
      in_table = false;
      continue;
    }
    if (line.starts_with("| " + first_header + " |")) {
      in_table = true;
      continue;
    }
    std::smatch m;
    if (in_table && std::regex_match(line, m, row)) {
      EXPECT_FALSE(out.contains(m[1])) << "documented twice: " << m[1];
      out[m[1]] = {m[2], m[4]};
    }
  }
  return out;
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    default:
      return "object";
  }
}

// Whether a value of JSON type `name` fits the documented type text.
bool type_fits(const std::string& doc, const std::string& name) {
  if (doc.find(name) != std::string::npos) return true;
  // A whole number is a number too (1.0 is written as 1.0, 0 may be written as 0).
  return name == "integer" && doc.find("number") != std::string::npos;
}

struct Walk {
  const std::map<std::string, DocField>& doc;
  std::set<std::string> written;
  std::vector<std::string> problems;

  bool documented_under(const std::string& path) const {
    const auto it = doc.lower_bound(path);
    return it != doc.end() && it->first.starts_with(path) &&
           (it->first.size() == path.size() || it->first[path.size()] == '.' ||
            it->first[path.size()] == '[');
  }

  void visit(const json& v, const std::string& path) {
    if (!path.empty()) {
      written.insert(path);
      const auto it = doc.find(path);
      if (it != doc.end() && !type_fits(it->second.type, type_name(v))) {
        problems.push_back(path + " is " + type_name(v) + ", documented as " + it->second.type);
      }
    }
    if (v.is_object()) {
      if (doc.contains(path + ".*")) written.insert(path + ".*");  // a map: its entries
      for (const auto& [key, child] : v.items()) {
        std::string p = path.empty() ? key : path + "." + key;
        if (!documented_under(p)) {
          if (doc.contains(path + ".*")) {
            p = path + ".*";
          } else {
            problems.push_back("not documented: " + p);
            continue;
          }
        }
        visit(child, p);
      }
    } else if (v.is_array()) {
      written.insert(path + "[]");
      for (const auto& e : v)
        visit(e, path + "[]");
    }
  }
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A profile run: its exit, output and summary.json.
struct ProfileRun {
  int exit_code = -1;
  std::string stdout_text, stderr_text;
  json summary;
  fs::path dir;
};

class SummarySchema : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::path(::testing::TempDir()) / ("kvprof_schema_" + std::to_string(::getpid()));
    fs::remove_all(s_dir);
    fs::create_directories(s_dir);
    const auto join = [](const std::vector<uint32_t>& v) {
      std::string s;
      for (const auto x : v)
        s += (s.empty() ? "" : ",") + std::to_string(x);
      return s;
    };
    const std::string serve_sim =
        std::string(KVPROF_BIN) +
        " serve-sim --model {model} --gpu H100 --host {host} --port {port} --max-num-seqs " +
        std::to_string(k_max_num_seqs) + " --num-gpu-blocks " + std::to_string(k_num_gpu_blocks) +
        " --block-size " + std::to_string(k_block_size) +
        " --tokens-per-s 40 --max-model-len 1024 --kv-on-demand --vllm-startup-log "
        "--startup-line-delay-ms 5 --live-state " +
        (s_dir / "live.txt").string();
    s_limits = profile({"--launch", serve_sim, "--model", "sim-limits", "--run-tag", "limits",
                        "--input-lens", join(k_input_lens), "--output-lens",
                        std::to_string(k_output_len), "--concurrencies", join(k_concurrencies)});
    // A llama.cpp startup log ending with the memory breakdown table newer builds print.
    const fs::path llama_log = s_dir / "llama.log";
    std::ofstream(llama_log)
        << read_text(fs::path(KVPROF_FIXTURES_DIR) / "llama_cpp_logs" / "startup_f16_np4.log")
        << "llama_memory_breakdown_print: | memory breakdown [MiB] | total   free    self   model  "
           " context   compute    unaccounted |\n"
           "llama_memory_breakdown_print: |   - CUDA0 (RTX 4090)   | 24080 = 1000 + (22000 = "
           "20000 +    1500 +     500) +        1080 |\n"
           "llama_memory_breakdown_print: |   - Host               |                  300 =   "
           "250 +       0 +      50                |\n";
    s_llama = profile({"--run-tag", "llama", "--input-lens", "64", "--output-lens", "4",
                       "--concurrencies", "1,2", "--server-log", llama_log.string()});
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(s_dir, ec);
  }

  static sys::CommandOptions env() {
    sys::CommandOptions o;
    o.timeout = 90s;
    o.env = {{"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
             {"KVPROF_FAKE_NVML_GPUS", "1"},
             {"KVPROF_FAKE_NVML_LIVE", (s_dir / "live.txt").string()},
             {"KVPROF_URL", ""},
             {"KVPROF_MODEL", ""}};
    return o;
  }

  static ProfileRun profile(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {KVPROF_BIN,
                                     "profile",
                                     "--output-dir",
                                     results().string(),
                                     "--baseline-s",
                                     "0.1",
                                     "--post-warmup-s",
                                     "0.1",
                                     "--metrics-interval-ms",
                                     "20",
                                     "--prefix-modes",
                                     "low"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProfileRun run;
    const auto r = sys::run_command(args, env());
    if (!r) return run;
    run.exit_code = r->exit_code;
    run.stdout_text = r->stdout_text;
    run.stderr_text = r->stderr_text;
    // The run folder is the last line "results: DIR" of the table.
    const auto at = r->stdout_text.rfind("results: ");
    if (at == std::string::npos) return run;
    const auto end = r->stdout_text.find('\n', at);
    run.dir = r->stdout_text.substr(at + 9, end - at - 9);
    run.summary = json::parse(read_text(run.dir / "summary.json"), nullptr, false);
    return run;
  }

  static fs::path results() { return s_dir / "results"; }

  static void expect_ran(const ProfileRun& run) {
    ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.stdout_text;
    ASSERT_TRUE(run.summary.is_object()) << run.dir;
  }

  static inline fs::path s_dir;
  static inline ProfileRun s_limits, s_llama;
};

TEST_F(SummarySchema, EveryFieldWrittenIsDocumentedAndEveryDocumentedFieldIsWritten) {
  ASSERT_NO_FATAL_FAILURE(expect_ran(s_limits));
  ASSERT_NO_FATAL_FAILURE(expect_ran(s_llama));
  const auto doc = documented_fields(
      read_text(fs::path(KVPROF_SOURCE_DIR) / "docs" / "summary-schema.md"), "profile field");
  ASSERT_GT(doc.size(), 100U);
  Walk walk{doc, {}, {}};
  walk.visit(s_limits.summary, "");
  walk.visit(s_llama.summary, "");
  for (const auto& p : walk.problems)
    ADD_FAILURE() << p;
  // Written only when GPU readings fail during a run
  // (ProfileThroughPrometheus.AnOutageDuringTheRun... in profile_remote_gpu_test.cpp checks each
  // of them in a run through a real Prometheus), and in a sweep job of several nodes
  // (SweepSlurmTwoNodes.* in experiment_sweep_slurm_nodes_test.cpp, on a real Slurm cluster).
  const std::set<std::string> written_elsewhere{"gpu_gaps.gaps[].gpu",
                                                "gpu_gaps.gaps[].from_s",
                                                "gpu_gaps.gaps[].to_s",
                                                "gpu_gaps.gaps[].filled_readings",
                                                "nodes",
                                                "nodes[]",
                                                "nodes[].node",
                                                "nodes[].trace",
                                                "nodes[].gpus",
                                                "nodes[].gpus[]",
                                                "nodes[].gpus[].gpu",
                                                "nodes[].gpus[].first_used_bytes",
                                                "nodes[].gpus[].peak_used_bytes"};
  for (const auto& [path, field] : doc) {
    EXPECT_TRUE(walk.written.contains(path) || written_elsewhere.contains(path))
        << "documented but not written: " << path;
    EXPECT_FALSE(field.meaning.find_first_not_of(' ') == std::string::npos) << path;
  }
  // Every `_gb` field is documented as an alias, of a `_gib` field written beside it.
  for (const auto& [path, field] : doc) {
    if (!path.ends_with("_gb")) continue;
    EXPECT_NE(field.meaning.find("Alias of `"), std::string::npos) << path;
    const std::string gib = path.substr(0, path.size() - 2) + "gib";
    EXPECT_TRUE(doc.contains(gib)) << path;
  }
}

TEST_F(SummarySchema, GibFieldsAreTheBytesInGibAndTheGbAliasesEqualThem) {
  ASSERT_NO_FATAL_FAILURE(expect_ran(s_limits));
  const json& s = s_limits.summary;
  // The predecessor's own checks (document 003) pass: jq -e '.schema_version == "2.0"' and
  // '.profiler_version == "2.0"'; kvprof's integer version and its own version are kept apart.
  EXPECT_EQ(s.at("schema_version"), "2.0");
  EXPECT_EQ(s.at("profiler_version"), "2.0");
  EXPECT_EQ(s.at("schema_version_number"), 2);
  EXPECT_EQ(s.at("kvprof_version"), KVPROF_VERSION);
  size_t n_gib = 0;
  const std::function<void(const json&)> check = [&](const json& j) {
    if (j.is_array()) {
      for (const auto& e : j)
        check(e);
      return;
    }
    if (!j.is_object()) return;
    for (const auto& [key, v] : j.items()) {
      check(v);
      if (!key.ends_with("_gib") || v.is_null()) continue;
      ++n_gib;
      const std::string stem = key.substr(0, key.size() - 4);
      const std::string bytes_key = stem + "_bytes";
      ASSERT_TRUE(j.contains(bytes_key)) << key;
      EXPECT_NEAR(v.get<double>(), j.at(bytes_key).get<double>() / k_gib, 1e-6) << key;
      if (j.contains(stem + "_gb")) {
        EXPECT_EQ(j.at(stem + "_gb"), v) << key;
      }
    }
  };
  check(s);
  EXPECT_GE(n_gib, 9U);
  const json& b = s.at("memory_breakdown");
  EXPECT_EQ(b.at("kv_cache_gb"), b.at("kv_cache_gib"));
  EXPECT_EQ(s.at("memory_measurements").at("peak").at("total_gb"),
            s.at("memory_measurements").at("peak").at("total_gib"));
}

// The largest concurrency each input length can run without queueing, from serve-sim's limits:
// at most --max-num-seqs requests run, and a request needs its prompt + output in blocks.
uint32_t implied_max_concurrency(uint32_t input_len) {
  const uint32_t blocks = (input_len + k_output_len + k_block_size - 1) / k_block_size;
  uint32_t best = 0;
  for (const uint32_t c : k_concurrencies) {
    if (c <= k_max_num_seqs && c * blocks <= k_num_gpu_blocks) best = c;
  }
  return best;
}

TEST_F(SummarySchema, DerivedLargestConcurrencyIsTheOneTheServersLimitsImply) {
  ASSERT_NO_FATAL_FAILURE(expect_ran(s_limits));
  const json& d = s_limits.summary.at("derived");
  const json& limits = d.at("max_concurrency_without_queueing");
  ASSERT_EQ(limits.size(), k_input_lens.size()) << limits.dump(1);
  for (size_t i = 0; i < k_input_lens.size(); ++i) {
    const json& a = limits[i];
    const uint32_t in = k_input_lens[i];
    EXPECT_EQ(a.at("input_len_tokens"), in);
    const uint32_t implied = implied_max_concurrency(in);
    ASSERT_GT(implied, 0U);
    EXPECT_EQ(a.at("max_concurrency"), implied) << a.dump(1);
    // The next concurrency of the grid queued, and the evidence shows it.
    const uint32_t next =
        *std::upper_bound(k_concurrencies.begin(), k_concurrencies.end(), implied);
    EXPECT_EQ(a.at("first_queued_concurrency"), next) << a.dump(1);
    for (const auto& e : a.at("evidence")) {
      const bool clean = e.at("concurrency").get<uint32_t>() <= implied;
      EXPECT_EQ(e.at("ran_without_queueing"), clean) << e.dump();
      if (!clean) {
        EXPECT_GT(e.at("peak_num_requests_waiting").get<double>(), 0.0) << e.dump();
      }
      EXPECT_LE(e.at("peak_num_requests_running").get<double>(), k_max_num_seqs) << e.dump();
    }
  }
  // The terminal table says it too.
  EXPECT_NE(s_limits.stdout_text.find("largest concurrency without queueing or preemption at "
                                      "input 512: " +
                                      std::to_string(implied_max_concurrency(512))),
            std::string::npos)
      << s_limits.stdout_text;
  // The server's gauges are named as the server's, apart from kvprof's own "queued".
  EXPECT_NE(s_limits.stdout_text.find("srv running"), std::string::npos);
  EXPECT_NE(s_limits.stdout_text.find("srv waiting"), std::string::npos);
  EXPECT_NE(s_limits.stdout_text.find("srv running / srv waiting: the server's own gauges"),
            std::string::npos)
      << s_limits.stdout_text;

  // KV tokens: usage x capacity where serve-sim (like vLLM) gives no token count; per request at
  // the KV peak within one block of prompt + output rounded up to blocks.
  for (const auto& c : s_limits.summary.at("conditions")) {
    ASSERT_FALSE(c.at("peak_kv_cache_used_tokens").is_null()) << c.at("condition_id");
    EXPECT_EQ(c.at("peak_kv_cache_used_tokens_source"), "usage x capacity");
    EXPECT_EQ(c.at("server").at("peak_kv_cache_used_tokens"), c.at("peak_kv_cache_used_tokens"));
    const double capacity = c.at("server").at("kv_cache_capacity_tokens");
    EXPECT_EQ(capacity, k_num_gpu_blocks * k_block_size);
    EXPECT_NEAR(c.at("peak_kv_cache_used_tokens").get<double>(),
                c.at("peak_kv_cache_usage").get<double>() * capacity, 0.5);
  }
  EXPECT_FALSE(s_limits.summary.at("server_metrics").at("peak_kv_cache_used_tokens").is_null());
  for (const auto& k : d.at("kv_tokens_per_request")) {
    const uint32_t in = k.at("input_len_tokens");
    const uint64_t expected =
        (in + k_output_len + k_block_size - 1) / k_block_size * uint64_t{k_block_size};
    EXPECT_EQ(k.at("expected_tokens"), expected);
    ASSERT_FALSE(k.at("measured_tokens").is_null()) << k.dump();
    EXPECT_LE(k.at("measured_tokens").get<double>(), static_cast<double>(expected)) << k.dump();
    EXPECT_GE(k.at("measured_tokens").get<double>(), static_cast<double>(expected - k_block_size))
        << k.dump();
  }
}

TEST_F(SummarySchema, ReadersAcceptRunsWrittenWithSchemaVersion1) {
  ASSERT_NO_FATAL_FAILURE(expect_ran(s_limits));
  // An old run folder in results/, indexed in the history database as kvprof recorded it then.
  const fs::path old_dir = results() / "20261124_220012_v1";
  fs::create_directories(old_dir);
  for (const auto& e : fs::directory_iterator(fs::path(KVPROF_FIXTURES_DIR) / "profile_run_v1"))
    fs::copy_file(e.path(), old_dir / e.path().filename(), fs::copy_options::overwrite_existing);
  const json old = json::parse(read_text(old_dir / "summary.json"));
  ASSERT_EQ(old.at("schema_version"), 1);
  {
    auto db = results::HistoryDb::open(results(), true);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    const auto old_run = results::read_run_summary(old, {}, old_dir);
    ASSERT_TRUE(old_run.has_value()) << old_run.error().message;
    ASSERT_TRUE((*db)->record(results::history_entry(*old_run)).has_value());
  }
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), KVPROF_BIN);
    auto r = sys::run_command(args, env());
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  };
  // kvprof runs lists both, the old one with its peak.
  auto r = run({"runs", "--results-dir", results().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  bool listed = false;
  const json runs = json::parse(r.stdout_text);
  for (const auto& e : runs.at("entries")) {
    if (e.at("id") != old.at("run_id")) continue;
    listed = true;
    EXPECT_EQ(e.at("peak_bytes"), old.at("memory_measurements").at("peak").at("total_bytes"));
  }
  EXPECT_TRUE(listed) << r.stdout_text;
  // kvprof compare by run id: the old run against the new one, its figures read.
  r = run({"compare", old.at("run_id").get<std::string>(), s_limits.dir.string(), "--results-dir",
           results().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json cmp = json::parse(r.stdout_text);
  bool peak_row = false;
  for (const auto& row : cmp.at("memory")) {
    if (row.at("name") != "peak") continue;
    peak_row = true;
    EXPECT_EQ(row.at("values")[0].get<double>(),
              old.at("memory_measurements").at("peak").at("total_bytes").get<double>());
    EXPECT_EQ(
        row.at("values")[1].get<double>(),
        s_limits.summary.at("memory_measurements").at("peak").at("total_bytes").get<double>());
  }
  EXPECT_TRUE(peak_row) << r.stdout_text;
  // kvprof report draws the old run.
  r = run({"report", old_dir.string(), "--format", "html", "--output-dir",
           (s_dir / "old_report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_GT(fs::file_size(s_dir / "old_report" / "report.html"), 1000U);
}

}  // namespace
}  // namespace kvprof
