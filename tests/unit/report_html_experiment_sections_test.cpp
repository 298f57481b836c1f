// report/html/experiment_sections.cpp and the reports of `sweep`, `find-max` and several runs: a
// real sweep and a real find-max search of the built-in simulator, their pages' data checked
// against the sweep.json and find_max.json they were made from, and the differences of two runs
// against their summaries.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "kvprof/report/html/experiment_sections.hpp"
#include "kvprof/report/html/run_data.hpp"
#include "kvprof/results/run_folder.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::report::html {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_kvprof;

// The page's embedded data.
json page_data(const fs::path& html) {
  std::ifstream in(html);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string open = "<script id=\"kvprof-data\" type=\"application/json\">";
  const size_t begin = text.find(open);
  if (begin == std::string::npos) return nullptr;
  const size_t end = text.find("</script>", begin);
  std::string payload = text.substr(begin + open.size(), end - begin - open.size());
  for (size_t at = payload.find("<\\/"); at != std::string::npos; at = payload.find("<\\/", at))
    payload.replace(at, 3, "</");
  return json::parse(payload);
}

json section_of(const json& data, const std::string& type) {
  for (const auto& s : data["sections"])
    if (s["type"] == type) return s;
  return nullptr;
}

class PlotExperiments : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof-plot-exp-" + std::to_string(::getpid()));
    fs::remove_all(s_dir);
    fs::create_directories(s_dir);
    std::ofstream(s_dir / "grid.yaml") << "name: grid\nbaseline_s: 0.05\npost_warmup_s: 0.05\n"
                                          "warmup_requests: 1\ngpu: H100\nmin_condition_s: 0.1\n"
                                          "input_lengths: [64, 256]\noutput_lengths: [8, 16]\n"
                                          "batch_sizes: [1, 4, 8]\nmodels:\n"
                                          "  - model_id: Qwen/Qwen2.5-0.5B-Instruct\n"
                                          "  - model_id: Qwen/Qwen2.5-0.5B-Instruct\n"
                                          "    kv_cache_dtype: fp8\n";
    s_sweep = run_kvprof("sweep -q --config " + (s_dir / "grid.yaml").string() + " --output-dir " +
                         (s_dir / "results").string());
    s_find_max = run_kvprof(
        "find-max -q --sim-num-gpu-blocks 60 --input-len 64 --output-len 32 "
        "--max-concurrency 64 --output-dir " +
        (s_dir / "results").string());
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }
  static fs::path s_dir;
  static test::Run s_sweep, s_find_max;
};
fs::path PlotExperiments::s_dir;
test::Run PlotExperiments::s_sweep, PlotExperiments::s_find_max;

TEST_F(PlotExperiments, SweepWritesHeatmapsOfWhatItMeasured) {
  ASSERT_EQ(s_sweep.rc, 0) << s_sweep.out;
  const fs::path folder = s_dir / "results" / "sweeps" / "grid";
  EXPECT_NE(s_sweep.out.find("report: " + (folder / "report.html").string()), std::string::npos)
      << s_sweep.out;
  const json sweep = *results::read_json_file(folder / "sweep.json");
  const json page = page_data(folder / "report.html");
  const json s = section_of(page, "sweep");
  ASSERT_TRUE(s.is_object());
  ASSERT_EQ(s["configurations"].size(), 2u);
  const double unit = s["unit"] == "GiB" ? 1073741824.0 : 1048576.0;
  for (size_t i = 0; i < 2; ++i) {
    const json& cfg = s["configurations"][i];
    const json& measured = sweep["configurations"][i]["run"]["measured"]["conditions"];
    ASSERT_EQ(cfg["heatmaps"].size(), 2u);  // output lengths 8 and 16
    for (const auto& hm : cfg["heatmaps"]) {
      EXPECT_EQ(hm["input_lens"], json({64, 256}));
      EXPECT_EQ(hm["batch_sizes"], json({1, 4, 8}));
      ASSERT_EQ(hm["cells"].size(), 6u);
      for (const auto& cell : hm["cells"]) {
        const uint32_t in = hm["input_lens"][cell["row"].get<size_t>()];
        const uint32_t bs = hm["batch_sizes"][cell["col"].get<size_t>()];
        const std::string id = "in" + std::to_string(in) + "_out" +
                               std::to_string(hm["output_len"].get<uint32_t>()) + "_c" +
                               std::to_string(bs) + "_low";
        EXPECT_EQ(cell["condition"], id);
        const json& m = measured.at(id);
        ASSERT_TRUE(cell["peak"].is_number()) << id;
        EXPECT_NEAR(cell["peak"].get<double>(), m["peak_used_bytes"].get<double>() / unit, 1e-4);
        EXPECT_NEAR(cell["kv_pct"].get<double>(), m["peak_kv_cache_usage"].get<double>() * 100,
                    1e-4);
      }
    }
  }
  // fp8 halves the KV cache the batch needs of the pool: the plan sized the simulated engine.
  const auto est = [&](size_t i) { return s["configurations"][i]["heatmaps"][0]["cells"][5]; };
  EXPECT_NEAR(est(1)["est_kv_pct"].get<double>() * 2, est(0)["est_kv_pct"].get<double>(), 2e-4);
  // What the simulated engine's gauge showed never exceeds what the batch needs at full length
  // (blocks rounded up): fp8's pool is the one it used. (The peak a scrape catches varies.)
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(est(i)["kv_pct"].get<double>(), 0.0) << i;
    EXPECT_LE(est(i)["kv_pct"].get<double>(), est(i)["est_kv_pct"].get<double>() * 1.1) << i;
  }
  // Every configuration's run has its section; the side-by-side section compares them.
  size_t runs = 0;
  for (const auto& sec : page["sections"])
    runs += sec["type"] == "run" ? 1 : 0;
  EXPECT_EQ(runs, 2u);
  EXPECT_TRUE(section_of(page, "compare").is_object());
}

TEST_F(PlotExperiments, FindMaxWritesItsStepsAndAnswer) {
  ASSERT_EQ(s_find_max.rc, 0) << s_find_max.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s_find_max.out, m, std::regex("report: (.*)/report.html")))
      << s_find_max.out;
  const fs::path folder = m[1].str();
  const json fm = *results::read_json_file(folder / "find_max.json");
  const json page = page_data(folder / "report.html");
  const json s = section_of(page, "find_max");
  ASSERT_TRUE(s.is_object());
  // find_max.json schema 2: the answer under the plain name, the range searched apart.
  EXPECT_EQ(fm["schema_version"], 2);
  EXPECT_FALSE(fm.contains("max_concurrency_found"));
  EXPECT_EQ(s["answer"], fm["max_concurrency"]);
  EXPECT_TRUE(fm["max_concurrency"].is_number());
  EXPECT_EQ(s["max_concurrency"], fm["concurrency_range"]["max"]);
  EXPECT_EQ(s["min_concurrency"], fm["concurrency_range"]["min"]);
  EXPECT_LE(fm["max_concurrency"].get<int>(), fm["concurrency_range"]["max"].get<int>());
  EXPECT_EQ(s["first_fail"], fm["first_failing_concurrency"]);
  ASSERT_EQ(s["steps"].size(), fm["steps"].size());
  for (size_t i = 0; i < fm["steps"].size(); ++i) {
    EXPECT_EQ(s["steps"][i]["concurrency"], fm["steps"][i]["concurrency"]);
    EXPECT_EQ(s["steps"][i]["pass"], fm["steps"][i]["pass"]);
    EXPECT_EQ(s["steps"][i]["run_dir"], fm["steps"][i]["outcome"]["run_dir"]);
  }
  // Each step's run follows; no side-by-side section for one-condition steps.
  size_t runs = 0;
  for (const auto& sec : page["sections"])
    runs += sec["type"] == "run" ? 1 : 0;
  EXPECT_EQ(runs, fm["steps"].size());
  EXPECT_TRUE(section_of(page, "compare").is_null());
  // `kvprof report FOLDER` rewrites the same page; with another run it is refused.
  fs::remove(folder / "report.html");
  const auto again = run_kvprof("report " + folder.string());
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_EQ(section_of(page_data(folder / "report.html"), "find_max")["steps"], s["steps"]);
  const auto mixed = run_kvprof("report " + folder.string() + " " +
                                fm["steps"][0]["outcome"]["run_dir"].get<std::string>());
  EXPECT_EQ(mixed.rc, 2) << mixed.out;
  EXPECT_NE(mixed.out.find("report it alone"), std::string::npos) << mixed.out;
}

TEST_F(PlotExperiments, SeveralRunsShowTheirDifferences) {
  ASSERT_EQ(s_sweep.rc, 0) << s_sweep.out;
  const json sweep = *results::read_json_file(s_dir / "results" / "sweeps" / "grid" / "sweep.json");
  const std::string a = sweep["configurations"][0]["run"]["run_dir"];
  const std::string b = sweep["configurations"][1]["run"]["run_dir"];
  const fs::path out = s_dir / "cmp";
  const auto r = run_kvprof("report " + a + " " + b + " -o " + out.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  const json deltas = section_of(page_data(out / "report.html"), "compare")["deltas"];
  ASSERT_TRUE(deltas.is_object());
  const double unit = deltas["unit"] == "GiB" ? 1073741824.0 : 1048576.0;
  const json sa = *results::read_json_file(fs::path(a) / "summary.json");
  const json sb = *results::read_json_file(fs::path(b) / "summary.json");
  const double peak_a = sa["memory_measurements"]["peak"]["total_bytes"];
  const double peak_b = sb["memory_measurements"]["peak"]["total_bytes"];
  bool found = false;
  for (const auto& row : deltas["memory"]) {
    if (row["name"] != "peak") continue;
    found = true;
    EXPECT_NEAR(row["values"][0].get<double>(), peak_a / unit, 1e-4);
    EXPECT_NEAR(row["diff"][0].get<double>(), (peak_b - peak_a) / unit, 1e-4);
    EXPECT_NEAR(row["pct"][0].get<double>(), (peak_b - peak_a) / peak_a * 100, 0.05);
  }
  EXPECT_TRUE(found) << deltas.dump();
  // The one setting that differs between the two configurations is listed.
  bool kv_dtype = false;
  for (const auto& s : deltas["settings"])
    kv_dtype = kv_dtype || s["name"].get<std::string>().find("kv_cache_dtype") != std::string::npos;
  EXPECT_TRUE(kv_dtype) << deltas["settings"].dump();
}

TEST(PlotExperimentSections, MalformedFilesGiveEmptySectionsNotExceptions) {
  for (const char* text :
       {"{}", R"({"configurations": 3})", R"({"configurations": [{"conditions": [1, null]}]})",
        R"({"configurations": [{"conditions": [{"input_len": -5, "output_len": "x"}]}]})",
        R"({"steps": [{"outcome": 7, "concurrency": "many"}], "max_concurrency_found": "x"})"}) {
    const json doc = json::parse(text);
    EXPECT_NO_THROW(sweep_section(doc, "/tmp")) << text;
    EXPECT_NO_THROW(find_max_section(doc, "/tmp")) << text;
    EXPECT_NO_THROW(compare_deltas(doc)) << text;
    EXPECT_TRUE(experiment_run_dirs("sweep", doc, "/tmp").empty()) << text;
  }
  EXPECT_FALSE(experiment_kind("/nonexistent/folder").has_value());
}

TEST(PlotExperimentSections, AFindMaxOfSchemaOneReadsItsOldNames) {
  // Folders written before schema 2 named the answer max_concurrency_found and the range's top
  // max_concurrency.
  const json old = json::parse(
      R"({"schema_version": 1, "min_concurrency": 1, "max_concurrency": 64,
          "max_concurrency_found": 10, "steps": []})");
  const json s1 = find_max_section(old, "/tmp");
  EXPECT_EQ(s1["answer"], 10);
  EXPECT_EQ(s1["max_concurrency"], 64);
  const json now = json::parse(
      R"({"schema_version": 2, "max_concurrency": 10,
          "concurrency_range": {"min": 1, "max": 64}, "steps": []})");
  const json s2 = find_max_section(now, "/tmp");
  EXPECT_EQ(s2["answer"], 10);
  EXPECT_EQ(s2["max_concurrency"], 64);
  EXPECT_EQ(s2["min_concurrency"], 1);
}

}  // namespace
}  // namespace kvprof::report::html
