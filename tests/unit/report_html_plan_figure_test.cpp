// `kvprof estimate --plot`: the PNG decodes and has ink, the SVG carries its words, the marked
// points are the numbers estimate --json reports, the curve crosses the KV capacity there, and a
// bad extension is a usage error.
#include "kvprof/report/html/plan_figure.hpp"

#include <cairo.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/inverse.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/run_kvprof.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::report::html {
namespace {

namespace fs = std::filesystem;
using test::run_kvprof;

class PlanFigure : public test::TempDirTest {
 protected:
  PlanFigure() : TempDirTest("plan_figure") {}
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A plan whose KV cache runs out inside both figures: a 7B model on a 24 GB GPU.
constexpr const char* k_plan = "estimate -m qwen2.5-7b -g L4 --max-model-len 32768";

TEST_F(PlanFigure, PngDecodesAtTwiceTheSizeAndIsNotBlank) {
  const fs::path png = m_dir / "plan.png";
  const auto r = run_kvprof(fmt::format("{} --plot {}", k_plan, png.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("Verdict:"), std::string::npos) << r.out;  // the text is still there
  EXPECT_NE(r.out.find("plot: " + png.string() + "\n"), std::string::npos) << r.out;
  cairo_surface_t* img = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
  const int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
  EXPECT_EQ(w, 2200);
  EXPECT_EQ(h, 2720);  // two figures of 1100 x 680, drawn at 2x
  const unsigned char* px = cairo_image_surface_get_data(img);
  const int stride = cairo_image_surface_get_stride(img);
  // Ink in both halves (each figure drawn), and the capacity red somewhere.
  size_t ink[2] = {0, 0}, red = 0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const unsigned char* p = px + y * stride + x * 4;  // B, G, R, A
      if (p[0] < 200 || p[1] < 200 || p[2] < 200) ++ink[y < h / 2 ? 0 : 1];
      if (p[2] > 150 && p[1] < 90 && p[0] < 90) ++red;
    }
  }
  cairo_surface_destroy(img);
  for (size_t half : {0, 1}) {
    const double share = static_cast<double>(ink[half]) / (w * h / 2.0);
    EXPECT_GT(share, 0.01) << half;
    EXPECT_LT(share, 0.5) << half;
  }
  EXPECT_GT(red, 1000U);
}

TEST_F(PlanFigure, SvgLabelsShowTheNumbersOfEstimateJson) {
  const fs::path svg = m_dir / "plan.SVG";
  const fs::path plan_json = m_dir / "plan.json";
  const auto r = run_kvprof(fmt::format("{} --context 16K --concurrency 4 --json -o {} --plot {}",
                                        k_plan, plan_json.string(), svg.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "plot: " + svg.string() + "\n");  // on stderr; the JSON went to -o
  const auto j = nlohmann::json::parse(slurp(plan_json));
  const auto& row = j.at("rows").at(0);
  ASSERT_EQ(row.at("context_tokens"), 16384);
  const auto max_concurrency = row.at("max_concurrency_at_context").get<uint64_t>();
  const auto max_context = row.at("max_context_at_concurrency").get<uint64_t>();
  ASSERT_GT(max_concurrency, 0U);
  ASSERT_LT(max_context, 32768U) << "the context figure should cross inside max_model_len";
  const std::string text = slurp(svg);
  ASSERT_NE(text.find("<svg"), std::string::npos);
  for (const std::string& word : std::vector<std::string>{
           "<title>Per-GPU memory vs concurrency, 16K-token requests / Per-GPU memory vs context "
           "length, 4 concurrent requests</title>",
           "x: concurrent requests.", "x: tokens per request (prompt + output, K = 1024).",
           "y: per-GPU memory (GiB).", "usable GPU memory.", "requests queue",
           fmt::format("max concurrency {} at 16384 tokens.", max_concurrency),
           fmt::format("max context {} tokens at concurrency 4.", max_context)}) {
    EXPECT_NE(text.find(word), std::string::npos) << word;
  }
}

TEST_F(PlanFigure, BadExtensionIsAUsageErrorNamingBoth) {
  const fs::path pdf = m_dir / "plan.pdf";
  const auto r = run_kvprof(fmt::format("{} --plot {}", k_plan, pdf.string()));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find(".png"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(".svg"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(pdf));
  EXPECT_EQ(
      run_kvprof(fmt::format("{} --recommend --plot {}", k_plan, (m_dir / "r.png").string())).rc,
      2);
}

// The "KV needed" curve is under the KV pool line up to the marked concurrency and over it at
// the next sample: the mark is where requests start to queue.
TEST(PlanFigures, KvNeededCrossesThePoolAtTheMark) {
  estimate::EstimateInput in;
  in.model = model::catalog_model("Qwen/Qwen2.5-7B-Instruct").value();
  in.gpu = gpu::find_gpu("L4").value();
  in.settings.max_model_len = 32768;
  const auto est = engines::plan(in).value();
  const auto figures = plan_figures(est, plan_point(est, in.workload));
  ASSERT_EQ(figures.size(), 2U);
  const Figure& f = figures[0];
  EXPECT_EQ(plan_point(est, in.workload).context_tokens, 32768U);
  ASSERT_EQ(f.marks.size(), 1U);
  ASSERT_EQ(f.hlines.size(), 2U);
  const double pool = f.hlines[1].y.front();
  const auto& curve = f.series.back();
  const uint64_t n = estimate::max_concurrency_at(est, 32768);
  ASSERT_GT(n, 0U);
  EXPECT_NE(f.marks[0].label.find(fmt::format("max concurrency {} ", n)), std::string::npos);
  size_t over = 0;
  for (size_t i = 0; i < curve.x.size(); ++i) {
    if (curve.x[i] <= f.marks[0].x + 1e-9) {
      EXPECT_LE(curve.y[i], pool + 1e-9) << curve.x[i];
    } else if (curve.y[i] > pool) {
      ++over;
    }
  }
  EXPECT_GT(over, 0U);
  EXPECT_LE(f.marks[0].y, pool + 1e-9);
  EXPECT_NE(f.subtitle.find("requests queue"), std::string::npos);
}

}  // namespace
}  // namespace kvprof::report::html
