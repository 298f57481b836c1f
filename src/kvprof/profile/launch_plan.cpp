// The plan of a launched server from its command (see launch_plan.hpp).
#include "kvprof/profile/launch_plan.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "kvprof/engines/assumptions.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/util/redact.hpp"

namespace kvprof::profile {

Expected<LaunchPlan> plan_from_launch(std::string_view command, const workload::GridOptions& grid,
                                      gpu::MemorySource* memory, unsigned gpu_index) {
  auto reading = engines::read_launch_command(command);
  if (!reading) {
    return fail(ErrorKind::not_found, "kvprof does not read this server's flags");
  }
  std::error_code ec;
  if (reading->model.empty() || !std::filesystem::exists(reading->model, ec)) {
    return fail(ErrorKind::not_found,
                fmt::format("the launch names no local model file ({} {})", reading->program,
                            reading->model.empty() ? "without -m" : reading->model));
  }
  estimate::EstimateInput in;
  auto model = model::load_model(reading->model);
  if (!model) {
    return fail(ErrorKind::not_found, model.error().message);
  }
  in.model = std::move(*model);
  in.settings = reading->settings;
  engines::AssumptionSources sources;
  sources.given = reading->given;
  std::optional<std::string> gpu_name;
  if (memory != nullptr) {
    if (auto d = memory->device_info(gpu_index); d && d->name) gpu_name = d->name;
  }
  // The GPU the memory source sees, or llama.cpp on the CPU; a GPU engine needs one.
  auto device = engines::plan_device(in.settings, "", gpu_name, "");
  if (!device) return std::unexpected(device.error());
  if (gpu::names_no_gpu(device->gpu)) {
    in.gpu = gpu::no_gpu();
    in.settings.no_gpu = true;
  } else {
    in.gpu = *gpu::find_gpu(device->gpu);
  }
  sources.gpu_origin = device->origin;
  sources.gpu_note = device->note;
  std::set<uint64_t> contexts;
  for (uint32_t in_len : grid.input_lens) {
    for (uint32_t out_len : grid.output_lens)
      contexts.insert(uint64_t{in_len} + out_len);
  }
  in.workload.context_tokens.assign(contexts.begin(), contexts.end());
  in.workload.concurrency = grid.concurrencies;
  auto est = engines::plan(in);
  if (!est) {
    return fail(ErrorKind::not_found, est.error().message);
  }
  LaunchPlan out;
  out.estimate = std::move(*est);
  out.flags = fmt::format("the launch command ({}, {})", reading->program,
                          redact_secrets(std::string(command)).substr(0, 300));
  out.assumptions = engines::estimate_assumptions(out.estimate, sources);
  out.notes = std::move(reading->notes);
  return out;
}

}  // namespace kvprof::profile
