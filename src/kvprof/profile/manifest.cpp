// Run directory and manifest.json (see manifest.hpp).
#include "kvprof/profile/manifest.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "kvprof/client/openai.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/profile/profiler.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::profile {

namespace fs = std::filesystem;
using nlohmann::json;

Expected<fs::path> create_run_dir(const fs::path& output_dir, std::string& run_id) {
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) {
    return fail(ErrorKind::io, fmt::format("cannot create the output directory {}: {}",
                                           output_dir.string(), ec.message()));
  }
  const std::string base = run_id;
  for (int n = 1; n < 1000; ++n) {
    if (n > 1) run_id = fmt::format("{}_{}", base, n);
    const fs::path dir = output_dir / run_id;
    if (fs::create_directory(dir, ec)) return dir;
    if (ec) {
      return fail(ErrorKind::io, fmt::format("cannot create the run directory {}: {}", dir.string(),
                                             ec.message()));
    }
  }
  return fail(ErrorKind::io,
              fmt::format("too many runs named {} in {}", base, output_dir.string()));
}

Expected<void> write_json_file(const fs::path& path, const json& value) {
  return write_file_atomically(path, json_text(value, 2) + "\n");
}

namespace {

json grid_json(const workload::GridOptions& g) {
  std::vector<std::string> modes;
  for (auto m : g.prefix_modes)
    modes.emplace_back(workload::prefix_mode_name(m));
  return {{"input_lens", g.input_lens},
          {"output_lens", g.output_lens},
          {"concurrencies", g.concurrencies},
          {"prefix_modes", modes},
          {"n_per_condition", g.n_per_condition},
          {"count_mode", workload::count_mode_name(g.count_mode)},
          {"seed", g.seed},
          {"request_rate", g.request_rate},
          {"prompt_format", workload::prompt_format_name(g.prompt_format)},
          {"prefix_fraction", g.prefix_fraction}};
}

json host_json() {
  const auto os = sys::read_os_info();
  const auto cpu = sys::read_cpu_info();
  const auto mem = sys::read_mem_info();
  return {{"os", os.pretty_name.value_or(os.kernel_name)},
          {"kernel", os.kernel_release},
          {"machine", os.machine},
          {"cpu", cpu.model ? json(*cpu.model) : json(nullptr)},
          {"logical_cores", cpu.logical_cores},
          {"memory_bytes", mem.total_bytes ? json(*mem.total_bytes) : json(nullptr)}};
}

}  // namespace

json manifest_json(const ProfileConfig& config, const ProfileReport& report,
                   const std::string& status, const std::string& driver_version,
                   const std::string& cuda_version) {
  json gpus = json::array();
  for (const auto& d : report.gpus) {
    gpus.push_back({{"index", d.index},
                    {"name", d.name ? json(*d.name) : json(nullptr)},
                    {"uuid", d.uuid ? json(*d.uuid) : json(nullptr)}});
  }
  const auto& run = config.run;
  return {
      {"schema_version", 1},
      {"kvprof_version", KVPROF_VERSION},
      {"run_id", report.run_id},
      {"status", status},
      {"started_unix_s", report.started_unix_s},
      {"ended_unix_s", report.ended_unix_s > 0 ? json(report.ended_unix_s) : json(nullptr)},
      {"simulated", report.simulated},
      {"simulation", config.simulation.empty() ? json(nullptr) : json(config.simulation)},
      {"configuration",
       {{"user", config.configuration},
        {"grid", grid_json(config.grid)},
        {"endpoint", redact_secrets(run.endpoint)},
        {"model", report.model},
        {"api", client::api_kind_name(run.api)},
        {"api_key_set", !run.api_key.empty()},
        {"request_timeout_s", run.request_timeout_s},
        {"transport",
         client::transport_kind_name(client::resolve_transport_kind(run.transport, run.endpoint))},
        {"read_interval_us", run.read_interval_us},
        {"gpus", config.gpus},
        {"gpu_interval_ms", config.gpu_interval_ms},
        {"process_interval_ms", config.process_interval_ms},
        {"host_pid", config.host_pid ? json(*config.host_pid) : json(nullptr)},
        {"metrics_interval_ms", config.metrics_interval_ms},
        {"baseline_s", config.baseline_s},
        {"warmup_requests", config.warmup_requests},
        {"post_warmup_s", config.post_warmup_s},
        {"output_dir", config.output_dir.string()},
        {"run_tag", config.run_tag},
        {"estimate_flags", config.estimate_flags}}},
      {"host", host_json()},
      {"memory_source", report.memory_source},
      {"gpus", gpus},
      {"driver",
       {{"driver_version", driver_version.empty() ? json(nullptr) : json(driver_version)},
        {"cuda_version", cuda_version.empty() ? json(nullptr) : json(cuda_version)}}},
      {"server",
       {{"base_url", redact_secrets(report.server.base_url)},
        {"models", report.server.models},
        {"version", report.server.version.empty() ? json(nullptr) : json(report.server.version)},
        {"owned_by", report.server.owned_by},
        {"engine_type", report.engine_type},
        {"simulated", report.server.simulated}}},
      {"files", report.files},
  };
}

}  // namespace kvprof::profile
