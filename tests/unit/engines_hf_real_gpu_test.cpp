// The HF transformers plan and the GPU catalog against what a real NVIDIA H200 measured
// (scripts/gpu_check.sh on the GPU machine, 2026-11-30; tests/fixtures/gpu_h200/README.md):
// generate() of three models built from their configs with random bf16 weights over a batch x
// prompt grid (torch's peak allocation, NVML's used memory), and NVML's figures of the device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/activations.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/hf_config.hpp"

namespace kvprof::engines {
namespace {

using nlohmann::json;

json read_gpu_fixture(const std::string& name) {
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/gpu_h200/" + name);
  return json::parse(in);
}

model::ModelSpec fixture_model(const std::string& config_file) {
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/hf/" + config_file);
  std::stringstream text;
  text << in.rdbuf();
  return model::parse_hf_config_text(text.str(), config_file).value();
}

// One measured point of generate() and kvprof's plan for it.
struct HfPoint {
  std::string label;
  double torch_peak_error = 0;  // (weights + KV + activations) vs torch.cuda.max_memory_allocated
  double total_error = 0;       // the plan's total vs NVML's used memory of the process
  double weights_error = 0;     // vs the parameters' bytes
};

std::vector<HfPoint> hf_points() {
  const json measured = read_gpu_fixture("hf_inprocess.json");
  // NVML's used memory before torch made its context: the driver's reserve, not the process's.
  const double idle_used = measured.at("nvml_used_before_context_bytes").get<double>();
  std::vector<HfPoint> points;
  for (const auto& m : measured.at("models")) {
    const auto spec = fixture_model(m.at("config").get<std::string>());
    for (const auto& p : m.at("points")) {
      const uint64_t context =
          p.at("prompt_tokens").get<uint64_t>() + p.at("new_tokens").get<uint64_t>();
      estimate::EstimateInput in;
      in.model = spec;
      in.gpu = gpu::find_gpu("H200").value();
      in.settings.engine = Engine::hf;
      in.settings.max_model_len = context;
      in.workload.context_tokens = {context};
      in.workload.concurrency = {p.at("batch").get<uint32_t>()};
      const auto est = plan(in).value();
      const auto& mb = est.per_gpu;
      HfPoint point;
      point.label = fmt::format("{} batch {} x {}", m.at("config").get<std::string>(),
                                p.at("batch").get<int>(), p.at("prompt_tokens").get<int>());
      point.torch_peak_error =
          static_cast<double>(mb.weights_bytes + mb.kv_cache_bytes + mb.activation_bytes) /
              p.at("max_allocated_bytes").get<double>() -
          1.0;
      point.total_error = static_cast<double>(mb.total_bytes) /
                              (p.at("nvml_used_bytes").get<double>() - idle_used) -
                          1.0;
      point.weights_error =
          static_cast<double>(mb.weights_bytes) / m.at("parameter_bytes").get<double>() - 1.0;
      points.push_back(point);
    }
  }
  return points;
}

TEST(HfOnARealH200, TorchsPeakIsWithinOnePercentAtEveryPoint) {
  const auto points = hf_points();
  ASSERT_EQ(points.size(), 15U);  // 6 + 6 + 3 (Phi-2 stops at its 2048 positions)
  for (const auto& p : points) {
    EXPECT_LT(std::abs(p.torch_peak_error), 0.01) << p.label << ": " << p.torch_peak_error;
    EXPECT_LT(std::abs(p.weights_error), 0.005) << p.label << ": " << p.weights_error;
  }
}

TEST(HfOnARealH200, TheTotalIsWithinEightPercentEverywhereAndTwoInTheMedian) {
  // Beside torch's peak: its allocator's cached blocks (10-40% of the forward's memory, a
  // quarter typically) and the CUDA libraries; the plan takes the typical share.
  auto points = hf_points();
  std::vector<double> errors;
  for (const auto& p : points) {
    EXPECT_LT(std::abs(p.total_error), 0.08) << p.label << ": " << p.total_error;
    errors.push_back(std::abs(p.total_error));
  }
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  EXPECT_LT(errors[errors.size() / 2], 0.02);
}

TEST(GpuCatalogOnARealH200, UsableMemoryIsNvmlsTotalLessItsReserveAndTheContextAsPlanned) {
  const json check = read_gpu_fixture("bench_gpu_check.json");
  const json& compare = check.at("memory_compare");
  const double total = compare.at("total").at("nvml_before_bytes").get<double>();
  const double reserved = compare.at("reserved").at("nvml_before_bytes").get<double>();
  const auto h200 = gpu::find_gpu("H200").value();
  EXPECT_NEAR(static_cast<double>(h200.memory_bytes), total - reserved, 1024.0 * 1024.0);
  // The CUDA context alone (cuMemAlloc's process, nothing loaded) against the plans' constant.
  const double context_mib = check.at("allocation").at("context_mib").get<double>();
  EXPECT_NEAR(static_cast<double>(estimate::k_cuda_context_bytes) / (1024.0 * 1024.0), context_mib,
              0.05 * context_mib);
}

}  // namespace
}  // namespace kvprof::engines
