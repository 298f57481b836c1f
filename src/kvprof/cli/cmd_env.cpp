// `kvprof env`: this machine as a run report needs it: OS, CPU, RAM, GPUs and driver (NVML),
// and the inference engines on PATH with their versions.
#include <fmt/format.h>

#include "kvprof/llama/library.hpp"

#include <cstdlib>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/gpu/nvml.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {
namespace {

template <class T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string optional_bytes(const std::optional<uint64_t>& bytes) {
  return bytes ? format_bytes(*bytes, 2, true) : std::string("?");
}

// GPUs through NVML: fills json["gpu"] and appends the text lines.
void describe_gpus(nlohmann::json& json, std::string& text) {
  nlohmann::json gpu = {{"available", false}, {"devices", nlohmann::json::array()}};
  auto source = gpu::NvmlSource::open();
  if (!source) {
    gpu["error"] = source.error().message;
    text += fmt::format("GPU:     {}\n", source.error().message);
    json["gpu"] = std::move(gpu);
    return;
  }
  gpu["available"] = true;
  const gpu::DriverInfo driver = (*source)->driver_info();
  gpu["driver_version"] = optional_json(driver.driver_version);
  gpu["cuda_driver_version"] =
      driver.cuda_driver_version
          ? nlohmann::json(gpu::format_cuda_version(*driver.cuda_driver_version))
          : nlohmann::json(nullptr);
  text +=
      fmt::format("Driver:  {}, CUDA {}\n", driver.driver_version.value_or("?"),
                  driver.cuda_driver_version ? gpu::format_cuda_version(*driver.cuda_driver_version)
                                             : std::string("?"));
  const unsigned count = (*source)->device_count().value_or(0);
  if (count == 0) text += "GPU:     none (the driver reports no GPUs)\n";
  for (unsigned i = 0; i < count; ++i) {
    nlohmann::json dev = {{"index", i}};
    auto info = (*source)->device_info(i);
    auto memory = (*source)->sample_device(i);
    std::optional<std::string> catalog_id;
    if (info) {
      dev["name"] = optional_json(info->name);
      dev["uuid"] = optional_json(info->uuid);
      if (info->name) {
        if (auto spec = gpu::find_gpu(*info->name)) catalog_id = spec->id;
      }
    }
    dev["catalog_id"] = optional_json(catalog_id);
    std::string mem_text;
    if (memory) {
      dev["total_bytes"] = optional_json(memory->total_bytes);
      dev["reserved_bytes"] = optional_json(memory->reserved_bytes);
      dev["free_bytes"] = optional_json(memory->free_bytes);
      dev["used_bytes"] = optional_json(memory->used_bytes);
      dev["used_includes_reserved"] = memory->used_includes_reserved;
      mem_text = fmt::format("total {}, reserved {}, used {}{}, free {}",
                             optional_bytes(memory->total_bytes),
                             memory->reserved_bytes ? format_bytes(*memory->reserved_bytes, 2, true)
                                                    : std::string("n/a"),
                             optional_bytes(memory->used_bytes),
                             memory->used_includes_reserved ? " (incl. reserved)" : "",
                             optional_bytes(memory->free_bytes));
    } else {
      dev["error"] = memory.error().message;
      mem_text = memory.error().message;
    }
    text +=
        fmt::format("GPU {}:   {} ({}){}\n         {}\n", i, info && info->name ? *info->name : "?",
                    info && info->uuid ? *info->uuid : "?",
                    catalog_id ? fmt::format(" = catalog {}", *catalog_id) : "", mem_text);
    gpu["devices"].push_back(std::move(dev));
  }
  json["gpu"] = std::move(gpu);
}

// llama.cpp's libllama (dlopen): fills json["llama_cpp"] and appends the text lines.
void describe_libllama(nlohmann::json& json, std::string& text) {
  auto lib = llama::LlamaLib::load();
  if (!lib) {
    json["llama_cpp"] = {{"found", false}, {"note", lib.error().message}};
    text += fmt::format("libllama: not loaded: {}\n", lib.error().message);
    return;
  }
  const auto& info = (*lib)->info();
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : info.devices)
    devices.push_back({{"name", d.name}, {"description", d.description}, {"type", d.type}});
  json["llama_cpp"] = {{"found", true},
                       {"library", info.library.string()},
                       {"llama_version", info.llama_version},
                       {"package", info.package},
                       {"llama_cpp_release", info.llama_cpp_release},
                       {"cpu_backend", info.cpu_backend},
                       {"devices", devices}};
  text += fmt::format("libllama: llama.cpp {} ({}{}), CPU backend {}\n          {}\n",
                      info.llama_version, info.package.empty() ? "unpackaged" : info.package,
                      info.llama_cpp_release.empty() ? "" : ", " + info.llama_cpp_release,
                      info.cpu_backend.empty() ? "?" : info.cpu_backend, info.library.string());
  for (const auto& d : info.devices)
    text += fmt::format("          device {}: {} ({})\n", d.name, d.description, d.type);
}

}  // namespace

void register_env_command(CLI::App& app) {
  auto out = std::make_shared<OutputOptions>();
  auto* cmd = app.add_subcommand(
      "env",
      "Show this machine: OS, CPU, RAM, GPUs and driver (NVML), inference engines on PATH.\n"
      "NVML is loaded from libnvidia-ml.so.1 (or $KVPROF_NVML_LIBRARY); engines are asked for\n"
      "their version with `<tool> --version` (5 s limit each, run in parallel); libllama is\n"
      "loaded like `kvprof bench` loads it (--llama-lib / $KVPROF_LLAMA_LIB / .deps/llama/).");
  add_output_options(cmd, *out);
  cmd->callback([out] {
    nlohmann::json json = {{"schema_version", 1}};
    std::string text;

    const sys::OsInfo os = sys::read_os_info();
    json["os"] = {{"kernel_name", os.kernel_name},
                  {"kernel_release", os.kernel_release},
                  {"machine", os.machine},
                  {"pretty_name", optional_json(os.pretty_name)}};
    text += fmt::format("OS:      {} ({} {} {})\n", os.pretty_name.value_or("unknown"),
                        os.kernel_name, os.kernel_release, os.machine);

    const sys::CpuInfo cpu = sys::read_cpu_info();
    json["cpu"] = {{"model", optional_json(cpu.model)},
                   {"logical_cores", cpu.logical_cores},
                   {"physical_cores", optional_json(cpu.physical_cores)}};
    text += fmt::format(
        "CPU:     {} ({} logical cores{})\n", cpu.model.value_or("unknown"), cpu.logical_cores,
        cpu.physical_cores ? fmt::format(", {} physical", *cpu.physical_cores) : std::string());

    const sys::MemInfo mem = sys::read_mem_info();
    json["memory"] = {{"total_bytes", optional_json(mem.total_bytes)},
                      {"available_bytes", optional_json(mem.available_bytes)}};
    text += fmt::format("RAM:     {} total, {} available\n", optional_bytes(mem.total_bytes),
                        optional_bytes(mem.available_bytes));

    describe_gpus(json, text);
    describe_libllama(json, text);

    const char* path_env = std::getenv("PATH");
    const auto engines = sys::find_engines(path_env != nullptr ? path_env : "");
    json["engines"] = nlohmann::json::array();
    text += "Engines:\n";
    for (const auto& e : engines) {
      json["engines"].push_back(
          {{"name", e.name},
           {"found", e.path.has_value()},
           {"path", optional_json(e.path)},
           {"version", optional_json(e.version)},
           {"note", e.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.note)}});
      std::string status = !e.path     ? "not found"
                           : e.version ? *e.version
                                       : fmt::format("version unknown: {}", e.note);
      text += fmt::format("  {:<26}{}{}\n", e.name, status,
                          e.path ? fmt::format("  ({})", *e.path) : std::string());
    }
    emit(*out, json, text);
  });
}

}  // namespace kvprof::cli
