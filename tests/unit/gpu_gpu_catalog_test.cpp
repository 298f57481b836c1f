// Tests of the built-in GPU catalog (data/gpus.json via src/kvprof/gpu/gpu_catalog.cpp):
// required GPUs, lookup by the names people write, plausible memory figures, unique aliases.
#include "kvprof/gpu/gpu_catalog.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>

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
                         "AMD Instinct MI300X",
                         "NVIDIA L20",
                         "NVIDIA A40",
                         "NVIDIA A30",
                         "NVIDIA A800-SXM4-80GB",
                         "NVIDIA A800 80GB PCIe",
                         "NVIDIA H800",
                         "NVIDIA H20",
                         "NVIDIA GH200 480GB",
                         "NVIDIA H200 NVL",
                         "NVIDIA GB200",
                         "Tesla T4",
                         "Tesla V100-SXM2-16GB",
                         "Tesla V100-SXM2-32GB",
                         "NVIDIA GeForce RTX 3080",
                         "NVIDIA GeForce RTX 4070 Ti",
                         "NVIDIA GeForce RTX 4080",
                         "NVIDIA GeForce RTX 5070",
                         "NVIDIA GeForce RTX 5080",
                         "NVIDIA RTX A4000",
                         "NVIDIA RTX A5000",
                         "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                         "AMD Instinct MI210",
                         "AMD Instinct MI250X/MI250",
                         "AMD Instinct MI325X"};
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

TEST(GpuCatalog, HoldsAtLeastFortyGpusWithUniqueIds) {
  const auto& catalog = gpu_catalog();
  EXPECT_GE(catalog.size(), 40U);
  std::set<std::string> ids;
  for (const auto& g : catalog) {
    EXPECT_TRUE(ids.insert(g.id).second) << g.id << " is listed twice";
  }
}

// The GPUs users asked for, by the names they type, each to its own entry.
TEST(GpuCatalog, RequestedGpusResolveByTheNamesPeopleType) {
  const std::pair<const char*, const char*> typed[] = {
      {"h20", "H20"},
      {"l20", "L20"},
      {"rtx-a4000", "RTX-A4000"},
      {"a4000", "RTX-A4000"},
      {"RTX A5000", "RTX-A5000"},
      {"a5000", "RTX-A5000"},
      {"rtx 6000 ada", "RTX-6000-ADA"},
      {"rtx-pro-6000", "RTX-PRO-6000"},
      {"rtx-6000-blackwell", "RTX-PRO-6000"},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"},
      {"mi250", "MI250X"},
      {"MI250X", "MI250X"},
      {"mi300x", "MI300X"},
      {"mi325x", "MI325X"},
      {"mi210", "MI210"},
      {"gb200", "GB200"},
      {"b300", "B300"},
      {"NVIDIA B300 SXM6 AC", "B300"},
      {"gb300", "GB300"},
      {"NVIDIA H20-3e", "H20-3E"},
      {"h20-141gb", "H20-3E"},
      {"mi355x", "MI355X"},
      {"NVIDIA A800-SXM4-40GB", "A800-SXM4-40GB"},
      {"NVIDIA A800 40GB Active", "A800-40GB-ACTIVE"},
      {"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX-PRO-6000"},
      {"gh200", "GH200"},
      {"h800", "H800"},
      {"h200-nvl", "H200-NVL"},
      {"a800", "A800-SXM4-80GB"},
      {"a40", "A40"},
      {"a30", "A30"},
      {"t4", "T4"},
      {"v100", "V100-SXM2-16GB"},
      {"v100-32gb", "V100-SXM2-32GB"},
      {"4080", "RTX-4080"},
      {"4070ti", "RTX-4070-TI"},
      {"rtx-3080", "RTX-3080"},
      {"rtx5080", "RTX-5080"},
  };
  for (const auto& [name, id] : typed) {
    const auto g = find_gpu(name);
    ASSERT_TRUE(g.has_value()) << name << ": " << g.error().message;
    EXPECT_EQ(g->id, id) << name;
  }
  EXPECT_EQ(find_gpu("mi325x")->vendor, "amd");
  EXPECT_EQ(find_gpu("h20")->compute_capability, 90U);
}

// memory_bytes is what the driver reports: below the marketed size (the driver and ECC keep
// some back) but never by more than a tenth.
TEST(GpuCatalog, UsableMemoryIsCloseToButBelowTheMarketedSize) {
  for (const auto& g : gpu_catalog()) {
    ASSERT_GT(g.memory_bytes, 0U) << g.id;
    ASSERT_GT(g.memory_nominal_bytes, 0U) << g.id;
    EXPECT_LT(g.memory_bytes, g.memory_nominal_bytes)
        << g.id << " lists the marketed size (or more) as usable";
    const double ratio =
        static_cast<double>(g.memory_bytes) / static_cast<double>(g.memory_nominal_bytes);
    EXPECT_GT(ratio, 0.9) << g.id;
  }
  // ROCm's own figure for the MI300X (rocm-smi "VRAM Total Memory (B)").
  EXPECT_EQ(find_gpu("mi300x")->memory_bytes, 206141652992U);
}

// Every figure says where it comes from: a public log or output it was read from, or that it
// was estimated.
TEST(GpuCatalog, EverySourceCitesALogOrSaysEstimated) {
  for (const auto& g : gpu_catalog()) {
    const bool cited = g.source.find("github.com/") != std::string::npos;
    const bool estimated = g.source.find("estimated") != std::string::npos;
    EXPECT_TRUE(cited || estimated) << g.id << ": " << g.source;
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
      EXPECT_GE(g.compute_capability, 70U) << g.id;  // Volta and newer
    } else {
      EXPECT_EQ(g.vendor, "amd") << g.id;
      EXPECT_EQ(g.compute_capability, 0U) << g.id;
    }
    // No fp8 tensor cores before Ada/Hopper (NVIDIA) and CDNA3 (AMD).
    for (const std::string_view arch : {"volta", "turing", "ampere", "cdna2"}) {
      if (g.arch == arch) {
        EXPECT_EQ(g.tflops_fp8, 0.0) << g.id;
      }
    }
  }
}

// How a node's GPUs talk decides whether a TP group holds NCCL's NVLS and symmetric-memory
// buffers: SXM parts are on NVLink, cards (NVL bridges included) on PCIe.
TEST(GpuCatalog, EveryGpuSaysHowItIsConnected) {
  for (const auto& g : gpu_catalog()) {
    EXPECT_TRUE(g.interconnect == "nvlink" || g.interconnect == "pcie" ||
                g.interconnect == "infinity-fabric")
        << g.id << ": " << g.interconnect;
    if (g.id.find("SXM") != std::string::npos) {
      EXPECT_EQ(g.interconnect, "nvlink") << g.id;
    }
    if (g.id.find("PCIE") != std::string::npos || g.id.starts_with("RTX")) {
      EXPECT_TRUE(g.pcie()) << g.id;
    }
  }
  for (const char* card : {"L40S", "4090", "A10", "L4", "T4", "H100-NVL", "rtx-pro-6000"})
    EXPECT_TRUE(find_gpu(card)->pcie()) << card;
  for (const char* sxm : {"H100", "H200", "B200", "A100-80GB", "H20"})
    EXPECT_EQ(find_gpu(sxm)->interconnect, "nvlink") << sxm;
  EXPECT_FALSE(custom_gpu(24ULL << 30).pcie());  // unknown: planned as before
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
