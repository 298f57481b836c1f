// report/html/run_data.cpp, figures.cpp, page.cpp, image.cpp and `kvprof report`: a real profile
// run of the built-in simulator read back, its page data checked against summary.json, the PNG
// figures decoded.
#include <cairo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kvprof/report/html/figures.hpp"
#include "kvprof/report/html/page.hpp"
#include "kvprof/report/html/run_data.hpp"
#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::report::html {
namespace {

namespace fs = std::filesystem;
using test::run_kvprof;

class PlotReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof-plot-" + std::to_string(::getpid()));
    fs::remove_all(s_dir);
    const auto r = run_kvprof("profile --sim -q --no-report --output-dir " + s_dir.string() +
                              " --concurrencies 1,4 --input-lens 256 --output-lens 16");
    ASSERT_EQ(r.rc, 0) << r.out;
    s_run = test::first_run_folder(s_dir);
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }
  static fs::path s_dir, s_run;
};
fs::path PlotReport::s_dir, PlotReport::s_run;

TEST_F(PlotReport, NoReportMeansNoPage) {
  EXPECT_FALSE(fs::exists(s_run / "report.html"));
}

TEST_F(PlotReport, RunReadBackMatchesItsSummary) {
  const auto run = load_run_data(s_run);
  ASSERT_TRUE(run) << run.error().message;
  const auto& s = run->summary_json;
  EXPECT_EQ(run->kind, "profile");
  EXPECT_TRUE(run->simulated);
  ASSERT_EQ(run->memory.size(), s["gpus"].size());
  EXPECT_EQ(run->memory[0].t_s.size(), s["sampler"]["device_rows"].get<size_t>());
  EXPECT_GE(run->memory[0].t_s.front(), 0.0);
  ASSERT_EQ(run->points.size(), s["conditions"].size());
  for (size_t i = 0; i < run->points.size(); ++i) {
    EXPECT_EQ(run->points[i].peak_bytes, s["conditions"][i]["peak_used_bytes"].get<double>());
    EXPECT_EQ(run->points[i].concurrency, s["conditions"][i]["concurrency"].get<uint32_t>());
  }
  ASSERT_EQ(run->captures.size(), 3u);
  EXPECT_EQ(run->captures[0].bytes,
            s["memory_measurements"]["baseline"]["total_bytes"].get<double>());
  // Requests in flight never exceed what the run reports, and reach it.
  ASSERT_TRUE(run->in_flight);
  const double most = *std::max_element(run->in_flight->value.begin(), run->in_flight->value.end());
  EXPECT_EQ(most, s["requests"]["max_in_flight"].get<double>());
  EXPECT_EQ(run->in_flight->value.back(), 0);
  ASSERT_TRUE(run->kv_usage);
  // The condition windows lie inside the sampled time.
  ASSERT_EQ(run->windows.size(), run->points.size());
  for (const auto& w : run->windows) {
    EXPECT_GT(w.begin_s, 0);
    EXPECT_LE(w.end_s, run->duration_s + 1);
  }
  EXPECT_FALSE(run->components.empty());
}

TEST_F(PlotReport, FiguresHaveASeriesPerGroupAndTheEstimate) {
  const auto run = load_run_data(s_run);
  ASSERT_TRUE(run);
  const Figure f = memory_vs_concurrency(std::span<const RunData>(&*run, 1));
  EXPECT_EQ(f.categories, (std::vector<std::string>{"1", "4"}));
  // Two prefix modes: two groups, each measured and estimated.
  ASSERT_EQ(f.series.size(), 4u);
  EXPECT_EQ(f.series[0].name, "in256_out16_low measured");
  EXPECT_EQ(f.series[1].nature, Nature::estimated);
  EXPECT_EQ(f.y_unit, "GiB");
  ASSERT_EQ(f.hlines.size(), 1u);  // the GPU's capacity
  EXPECT_NE(f.natures().find("simulated"), std::string::npos);
}

// A bench --seqlens sweep holds the concurrency and varies the input length: its figures are
// drawn against the input length, one series, not three dots stacked on one concurrency tick.
TEST(PlotAxis, ASequenceLengthSweepIsDrawnAgainstTheInputLength) {
  RunData run;
  run.run_id = "seqlens";
  run.memory_kind = "host";
  for (const uint32_t len : {32U, 256U, 128U}) {
    ConditionPoint p;
    p.label = "c1 p" + std::to_string(len);
    p.group = condition_group(p.label);
    p.concurrency = 1;
    p.input_len = len;
    p.peak_bytes = 1e8 + len * 1e4;
    p.tokens_per_s = 10.0;
    run.points.push_back(p);
  }
  const std::span<const RunData> runs(&run, 1);
  const Figure mem = memory_vs_concurrency(runs);
  EXPECT_EQ(mem.categories, (std::vector<std::string>{"32", "128", "256"}));
  EXPECT_NE(mem.title.find("vs input length"), std::string::npos) << mem.title;
  EXPECT_EQ(mem.x_label, "input length (prompt tokens)");
  EXPECT_EQ(mem.id, "fig1_mem_vs_input_len");  // the PNG and SVG are named after the axis
  ASSERT_EQ(mem.series.size(), 1U);
  EXPECT_EQ(mem.series[0].name, "c1 measured");
  EXPECT_EQ(mem.series[0].x, (std::vector<double>{0, 1, 2}));  // in order of length
  EXPECT_LT(mem.series[0].y[0], mem.series[0].y[2]);
  const Figure tps = throughput_vs_concurrency(runs);
  ASSERT_EQ(tps.series.size(), 1U);  // no "linear scaling" along input lengths
  // Several concurrencies keep the concurrency axis.
  run.points[1].concurrency = 4;
  EXPECT_EQ(memory_vs_concurrency(runs).x_label, "concurrent requests");
  // A profile condition id names its input length.
  EXPECT_EQ(input_len_of("in256_out16_c4_low"), 256U);
  EXPECT_FALSE(input_len_of("c1 p32").has_value());
  EXPECT_FALSE(input_len_of("in12x_out4").has_value());
}

TEST_F(PlotReport, PageEmbedsEverythingAndNeedsNoNetwork) {
  const auto run = load_run_data(s_run);
  ASSERT_TRUE(run);
  const auto html = report_html(report_data(std::span<const RunData>(&*run, 1), 2000));
  EXPECT_NE(html.find("Chart.js v3"), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://127.0.0.1"));  // only the run's endpoint
  EXPECT_EQ(html.find("https://"), html.find("https://www.chartjs.org"));
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

TEST_F(PlotReport, PngFiguresDecodeAndAreNotBlank) {
  const fs::path out = s_dir / "figs";
  const auto r =
      run_kvprof("report " + s_run.string() + " -o " + out.string() + " --format png,svg");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("fig1_mem_vs_concurrency.png"), std::string::npos);
  for (const char* name : {"fig1_mem_vs_concurrency.png", "fig2_tps_vs_concurrency.png"}) {
    cairo_surface_t* png = cairo_image_surface_create_from_png((out / name).c_str());
    ASSERT_EQ(cairo_surface_status(png), CAIRO_STATUS_SUCCESS) << name;
    const int w = cairo_image_surface_get_width(png), h = cairo_image_surface_get_height(png);
    EXPECT_EQ(w, 2200);
    EXPECT_EQ(h, 1360);
    const unsigned char* px = cairo_image_surface_get_data(png);
    const int stride = cairo_image_surface_get_stride(png);
    size_t ink = 0, coloured = 0;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const unsigned char* p = px + y * stride + x * 4;  // B, G, R, A
        if (p[0] < 200 || p[1] < 200 || p[2] < 200) ++ink;
        if (std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}) > 60) ++coloured;
      }
    }
    cairo_surface_destroy(png);
    const double share = static_cast<double>(ink) / (w * h);
    EXPECT_GT(share, 0.01) << name;
    EXPECT_LT(share, 0.5) << name;
    EXPECT_GT(coloured, 1000u) << name;
  }
  std::ifstream svg(out / "fig1_mem_vs_concurrency.svg");
  std::string head(200, '\0');
  svg.read(head.data(), 200);
  EXPECT_NE(head.find("<svg"), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "report.html"));
}

TEST_F(PlotReport, RunIdsAndLatestAreLookedUpInTheHistory) {
  const std::string id = s_run.filename().string();
  const fs::path out = s_dir / "by_id";
  const auto by_id = run_kvprof("report " + id + " --results-dir " + s_dir.string() + " -o " +
                                out.string() + " --format svg");
  ASSERT_EQ(by_id.rc, 0) << by_id.out;
  EXPECT_TRUE(fs::exists(out / "fig1_mem_vs_concurrency.svg"));
  const auto latest =
      run_kvprof("compare latest " + id + " --results-dir " + s_dir.string() + " --json");
  ASSERT_EQ(latest.rc, 0) << latest.out;
  EXPECT_NE(latest.out.find(id), std::string::npos);
  const auto unknown = run_kvprof("validate 20990101_000000 --results-dir " + s_dir.string());
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.out.find("kvprof runs"), std::string::npos) << unknown.out;
}

TEST(PlotReportCli, BadInputIsAUsageError) {
  EXPECT_EQ(run_kvprof("report /nonexistent/run").rc, 2);
  const fs::path empty =
      fs::temp_directory_path() / ("kvprof-plot-empty-" + std::to_string(::getpid()));
  fs::create_directories(empty);
  const auto r = run_kvprof("report " + empty.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("no summary.json"), std::string::npos) << r.out;
  std::ofstream(empty / "summary.json") << "{\"hello\": 1}";
  EXPECT_EQ(run_kvprof("report " + empty.string()).rc, 2);
  EXPECT_EQ(run_kvprof("report " + empty.string() + " --format gif").rc, 2);
  fs::remove_all(empty);
}

}  // namespace
}  // namespace kvprof::report::html
