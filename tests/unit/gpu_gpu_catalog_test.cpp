// Tests of the built-in GPU catalog (data/gpus.json via src/kvprof/gpu/gpu_catalog.cpp):
// required GPUs, lookup by the names people write, plausible memory figures, unique aliases.
#include "kvprof/gpu/gpu_catalog.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <string>

#include "kvprof/util/strings.hpp"

namespace kvprof::gpu {
namespace {

constexpr double k_gib_d = 1024.0 * 1024.0 * 1024.0;

// Same folding as find_gpu: case, spaces, dashes, underscores and a leading vendor dropped.
std::string fold(std::string_view name) {
  std::string s = to_lower(trim(name));
  for (const std::string_view prefix : {"nvidia ", "amd ", "nvidia-", "amd-"}) {
    if (s.starts_with(prefix)) s = s.substr(prefix.size());
  }
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '-' && c != '_') out.push_back(c);
  }
  return out;
}

TEST(GpuCatalog, EveryListedGpuIsPresentByItsNvmlName) {
  const char* names[] = {"NVIDIA A10",
                         "NVIDIA A10G",
                         "NVIDIA L4",
                         "NVIDIA L40S",
                         "NVIDIA A100-PCIE-40GB",
                         "NVIDIA A100-SXM4-40GB",
                         "NVIDIA A100 80GB PCIe",
                         "NVIDIA A100-SXM4-80GB",
                         "NVIDIA H100 PCIe",
                         "NVIDIA H100 80GB HBM3",
                         "NVIDIA H100 NVL",
                         "NVIDIA H200",
                         "NVIDIA B200",
                         "NVIDIA GeForce RTX 3090",
                         "NVIDIA GeForce RTX 4090",
                         "NVIDIA GeForce RTX 5090",
                         "NVIDIA RTX 6000 Ada Generation",
                         "NVIDIA RTX A6000",
                         "AMD Instinct MI300X"};
  for (const char* name : names) {
    const auto g = find_gpu(name);
    ASSERT_TRUE(g.has_value()) << name << ": " << g.error().message;
    EXPECT_EQ(g->name, name);
  }
  EXPECT_EQ(find_gpu("mi300x")->vendor, "amd");
}

TEST(GpuCatalog, H100NamesAllResolveToTheSameEntry) {
  const auto ref = find_gpu("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(ref.has_value());
  for (const char* name : {"H100", "H100-80GB", "h100-sxm", "h100 sxm", "H100_80GB"}) {
    const auto g = find_gpu(name);
    ASSERT_TRUE(g.has_value()) << name;
    EXPECT_EQ(g->id, ref->id) << name;
  }
  EXPECT_NEAR(static_cast<double>(ref->memory_bytes) / k_gib_d, 79.19, 0.005);
  EXPECT_TRUE(ref->supports_fp8());
  EXPECT_EQ(ref->compute_capability, 90U);
}

TEST(GpuCatalog, CommonShortNamesResolve) {
  EXPECT_EQ(find_gpu("4090")->name, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(find_gpu("rtx4090")->name, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(find_gpu("A100-80G")->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(find_gpu("l40s")->name, "NVIDIA L40S");
  EXPECT_FALSE(find_gpu("A100")->supports_fp8());
}

TEST(GpuCatalog, UnknownNameSuggestsACloseOne) {
  const auto g = find_gpu("H1000");
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().kind, ErrorKind::not_found);
  EXPECT_NE(g.error().message.find("did you mean"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("H100"), std::string::npos) << g.error().message;
}

TEST(GpuCatalog, UsableMemoryIsCloseToButNotTheMarketedSize) {
  for (const auto& g : gpu_catalog()) {
    ASSERT_GT(g.memory_bytes, 0U) << g.id;
    ASSERT_GT(g.memory_nominal_bytes, 0U) << g.id;
    if (g.vendor != "nvidia") continue;
    const double ratio =
        static_cast<double>(g.memory_bytes) / static_cast<double>(g.memory_nominal_bytes);
    EXPECT_LT(ratio, 1.1) << g.id;
    EXPECT_GT(ratio, 0.9) << g.id;
    EXPECT_NE(g.memory_bytes, g.memory_nominal_bytes)
        << g.id << " lists the marketed size as usable";
  }
}

TEST(GpuCatalog, EntriesAreComplete) {
  for (const auto& g : gpu_catalog()) {
    EXPECT_FALSE(g.source.empty()) << g.id;
    EXPECT_FALSE(g.arch.empty()) << g.id;
    EXPECT_GT(g.bandwidth_gb_s, 0.0) << g.id;
    EXPECT_GT(g.tflops_bf16, 0.0) << g.id;
    EXPECT_GT(g.price_hint, 0.0) << g.id;
    if (g.vendor == "nvidia") {
      EXPECT_GE(g.compute_capability, 80U) << g.id;
    }
    if (g.arch == "ampere") {
      EXPECT_EQ(g.tflops_fp8, 0.0) << g.id;
    }
  }
}

TEST(GpuCatalog, NamesAndAliasesAreUniqueAcrossEntries) {
  std::map<std::string, std::string> owner;
  for (const auto& g : gpu_catalog()) {
    std::vector<std::string> names = g.aliases;
    names.push_back(g.id);
    names.push_back(g.name);
    for (const auto& n : names) {
      const auto [it, inserted] = owner.emplace(fold(n), g.id);
      EXPECT_TRUE(inserted || it->second == g.id)
          << n << " names both " << it->second << " and " << g.id;
    }
  }
}

}  // namespace
}  // namespace kvprof::gpu
