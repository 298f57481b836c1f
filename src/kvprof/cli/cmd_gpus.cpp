// `kvprof gpus`: lists the built-in GPU catalog with the memory the driver reports.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/report/text/table.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {
namespace {

// The table shows the first few aliases (the JSON lists every one), so that a GPU known by many
// names (full driver names of each edition) does not widen the table for every row.
std::string alias_cell(const std::vector<std::string>& aliases) {
  constexpr size_t k_shown = 4;
  if (aliases.size() <= k_shown) return fmt::format("{}", fmt::join(aliases, ", "));
  return fmt::format("{}, +{} more", fmt::join(aliases.begin(), aliases.begin() + k_shown, ", "),
                     aliases.size() - k_shown);
}

}  // namespace

void register_gpus_command(CLI::App& app) {
  auto out = std::make_shared<OutputOptions>();
  auto* cmd = app.add_subcommand("gpus", "List the built-in GPU catalog");
  add_output_options(cmd, *out);
  cmd->callback([out] {
    nlohmann::json json = {{"schema_version", 1}, {"gpus", nlohmann::json::array()}};
    report::text::Table table({"gpu", "name (as the driver reports)", "usable", "bandwidth", "bf16",
                               "fp8", "link", "aliases"});
    for (const auto& g : gpu::gpu_catalog()) {
      json["gpus"].push_back({{"id", g.id},
                              {"name", g.name},
                              {"aliases", g.aliases},
                              {"vendor", g.vendor},
                              {"arch", g.arch},
                              {"compute_capability", g.compute_capability},
                              {"interconnect", g.interconnect},
                              {"memory_bytes", g.memory_bytes},
                              {"memory_nominal_bytes", g.memory_nominal_bytes},
                              {"bandwidth_gb_s", g.bandwidth_gb_s},
                              {"tflops_bf16", g.tflops_bf16},
                              {"tflops_fp8", g.tflops_fp8},
                              {"source", g.source}});
      table.add_row({g.id, g.name, format_bytes(g.memory_bytes),
                     fmt::format("{:.0f} GB/s", g.bandwidth_gb_s),
                     fmt::format("{:.0f} TF", g.tflops_bf16),
                     g.tflops_fp8 > 0 ? fmt::format("{:.0f} TF", g.tflops_fp8) : "-",
                     g.interconnect, alias_cell(g.aliases)});
    }
    emit(*out, json,
         table.render() + "usable = total memory as CUDA/NVML report it (GiB = 2^30)\n");
  });
}

}  // namespace kvprof::cli
