// bench_gpu_check: checks kvprof's NVML sampler on a real NVIDIA GPU against nvidia-smi and a known
// allocation made through the CUDA driver API (libcuda.so.1 loaded with dlopen; nothing CUDA is
// linked), and measures what one NVML query costs.
//   bench_gpu_check [--gpu N] [--alloc-mib 1024] [--json]
// Exit 0 when every check passes or is skipped, 1 when one fails, 2 when NVML is absent or the
// arguments are wrong. See docs/benchmarks.md, "GPU memory sampler".
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu_check_cuda.hpp"
#include "gpu_check_smi.hpp"
#include "kvprof/gpu/nvml.hpp"

namespace {

using namespace kvprof;
using nlohmann::json;
using namespace gpu_check;

constexpr double k_bytes_per_mib = 1024.0 * 1024.0;
constexpr double k_tolerance_mib = 2.0;  // nvidia-smi rounding and allocation granularity
constexpr auto k_settle = std::chrono::milliseconds(100);  // before each reading around CUDA calls
constexpr const char* k_usage = "usage: bench_gpu_check [--gpu N] [--alloc-mib 1024] [--json]\n";

struct Options {
  unsigned gpu = 0;
  uint64_t alloc_mib = 1024;
  bool json = false;
  bool help = false;
};

enum class Status { pass, fail, skip };

// What the run found: text lines (printed as they come unless --json), the same figures as JSON,
// and one status per check.
struct Report {
  bool print_text = true;
  json figures = json::object();
  json checks = json::array();
  bool failed = false;

  // Prints `text` as one line of the human-readable report.
  void line(const std::string& text) const {
    if (!print_text) return;
    fmt::print("{}\n", text);
    std::fflush(stdout);
  }
  // Records check `name` with `status` and a one-line `detail`.
  void check(const std::string& name, Status status, const std::string& detail) {
    static constexpr const char* k_text[] = {"PASS", "FAIL", "skipped"};
    static constexpr const char* k_json[] = {"pass", "fail", "skip"};
    const auto i = static_cast<size_t>(status);
    line(fmt::format("  {:<7} {}: {}", k_text[i], name, detail));
    checks.push_back({{"name", name}, {"status", k_json[i]}, {"detail", detail}});
    failed = failed || status == Status::fail;
  }
};

// `bytes` in MiB (2^20 bytes).
double to_mib(uint64_t bytes) {
  return static_cast<double>(bytes) / k_bytes_per_mib;
}

// Signed difference in MiB, a - b.
double diff_mib(uint64_t a_bytes, uint64_t b_bytes) {
  return to_mib(a_bytes) - to_mib(b_bytes);
}

// Pass when |`got_mib` - `want_mib`| is within the tolerance.
Status within(double got_mib, double want_mib) {
  return std::abs(got_mib - want_mib) <= k_tolerance_mib ? Status::pass : Status::fail;
}

// Parses the command line; an error names the bad argument.
Expected<Options> parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](uint64_t min, uint64_t max) -> Expected<uint64_t> {
      if (i + 1 >= argc) return fail(ErrorKind::usage, arg + " needs a value");
      const std::string text = argv[++i];
      uint64_t value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
        return fail(ErrorKind::usage,
                    fmt::format("{} '{}': expected an integer from {} to {}", arg, text, min, max));
      }
      return value;
    };
    if (arg == "--json") {
      o.json = true;
    } else if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--gpu" || arg == "--alloc-mib") {
      auto value = arg == "--gpu" ? number(0, 255) : number(1, 1 << 20);
      if (!value) return std::unexpected(value.error());
      if (arg == "--gpu") {
        o.gpu = static_cast<unsigned>(*value);
      } else {
        o.alloc_mib = *value;
      }
    } else {
      return fail(ErrorKind::usage, fmt::format("unknown argument '{}'", arg));
    }
  }
  return o;
}

// Compares one memory field: NVML read just before (`before`) and after (`after`) nvidia-smi.
void compare_field(const char* field, std::optional<uint64_t> before, std::optional<double> smi_mib,
                   std::optional<uint64_t> after, Report& r) {
  const std::string name = fmt::format("{} memory, NVML vs nvidia-smi", field);
  if (!before || !after || !smi_mib) {
    r.check(name, Status::skip, !smi_mib ? "nvidia-smi does not report it" : "NVML does not");
    return;
  }
  const double lo_mib = to_mib(std::min(*before, *after));
  const double hi_mib = to_mib(std::max(*before, *after));
  // The distance from nvidia-smi's figure to the nearer NVML reading (0 inside the bracket).
  const double diff = *smi_mib < lo_mib ? *smi_mib - lo_mib : std::max(0.0, *smi_mib - hi_mib);
  const std::string nvml_text = lo_mib == hi_mib ? fmt::format("{:.1f}", lo_mib)
                                                 : fmt::format("{:.1f}..{:.1f}", lo_mib, hi_mib);
  r.check(name, within(diff, 0.0),
          fmt::format("NVML {} MiB, nvidia-smi {:.0f} MiB, difference {:+.1f} MiB", nvml_text,
                      *smi_mib, diff));
  r.figures["memory_compare"][field] = {{"nvml_before_bytes", *before},
                                        {"nvml_after_bytes", *after},
                                        {"smi_mib", *smi_mib},
                                        {"diff_mib", diff}};
}

// Prints GPU `gpu`'s identity and compares NVML's memory figures with nvidia-smi's taken between
// two NVML readings; an error when NVML cannot read the GPU at all.
Expected<void> compare_with_smi(gpu::MemorySource& nvml, unsigned gpu, Report& r) {
  auto info = nvml.device_info(gpu);
  if (!info) return std::unexpected(info.error());
  const auto driver = nvml.driver_info();
  r.line(fmt::format(
      "GPU {}: {} ({}), driver {}, CUDA {}", gpu, info->name.value_or("?"),
      info->uuid.value_or("no UUID"), driver.driver_version.value_or("?"),
      driver.cuda_driver_version ? gpu::format_cuda_version(*driver.cuda_driver_version) : "?"));
  r.figures["device"] = {{"gpu", gpu},
                         {"name", info->name.value_or("")},
                         {"uuid", info->uuid.value_or("")},
                         {"driver_version", driver.driver_version.value_or("")},
                         {"cuda_driver_version", driver.cuda_driver_version.value_or(0)}};
  auto before = nvml.sample_device(gpu);
  if (!before) return std::unexpected(before.error());
  auto smi = smi_memory(gpu);
  auto after = nvml.sample_device(gpu);
  if (!after) return std::unexpected(after.error());
  if (before->used_includes_reserved) {
    r.line("  note: this driver has no nvmlDeviceGetMemoryInfo_v2: NVML used includes reserved");
  }
  if (!smi) {
    r.check("memory, NVML vs nvidia-smi", Status::skip, smi.error().message);
    return {};
  }
  compare_field("total", before->total_bytes, smi->total_mib, after->total_bytes, r);
  compare_field("reserved", before->reserved_bytes, smi->reserved_mib, after->reserved_bytes, r);
  compare_field("used", before->used_bytes, smi->used_mib, after->used_bytes, r);
  compare_field("free", before->free_bytes, smi->free_mib, after->free_bytes, r);
  return {};
}

// NVML's view of the GPU at one step of the allocation check.
struct Reading {
  std::optional<uint64_t> device_used_bytes;
  std::optional<uint64_t> process_used_bytes;  // this process; empty when not listed or unknown
  bool process_listed = false;                 // NVML lists this process on the GPU
  std::vector<uint32_t> pids;                  // every process NVML lists on the GPU
};

// Reads GPU `gpu`'s used memory and this process's after letting the driver settle; a failed
// query leaves its field empty and is printed.
Reading read_now(gpu::MemorySource& nvml, unsigned gpu, const Report& r) {
  std::this_thread::sleep_for(k_settle);
  Reading reading;
  if (auto memory = nvml.sample_device(gpu); memory) {
    reading.device_used_bytes = memory->used_bytes;
  } else {
    r.line("  NVML device query failed: " + memory.error().message);
  }
  auto processes = nvml.sample_processes(gpu);
  if (!processes) r.line("  NVML process query failed: " + processes.error().message);
  for (const auto& p : processes.value_or(std::vector<gpu::ProcessMemory>{})) {
    reading.pids.push_back(p.pid);
    if (p.pid != static_cast<uint32_t>(::getpid())) continue;
    reading.process_listed = true;
    reading.process_used_bytes = p.used_bytes;
  }
  return reading;
}

// NVML readings before the context, with it, with the allocation, after the free and after the
// context's release, plus nvidia-smi's compute-apps output taken with the allocation.
struct AllocationReadings {
  Reading before, with_context, allocated, freed, released;
  Expected<std::string> smi_apps = fail(ErrorKind::internal, "not run");
};

// Creates the primary context on GPU `o.gpu`, allocates and fills `o.alloc_mib` MiB, frees it,
// and reads NVML around each step; an error names the CUDA call that failed.
Expected<AllocationReadings> allocate_and_measure(gpu::MemorySource& nvml, const CudaDriver& cuda,
                                                  const Options& o, const Report& r) {
  AllocationReadings a;
  if (auto ok = cuda.ok(cuda.init(0), "cuInit"); !ok) return std::unexpected(ok.error());
  auto info = nvml.device_info(o.gpu);
  auto device = find_cuda_device(cuda, o.gpu, info ? info->uuid : std::nullopt);
  if (!device) return std::unexpected(device.error());
  a.before = read_now(nvml, o.gpu, r);
  CudaHold hold{cuda, *device};
  CUcontext context = nullptr;
  auto step = [&](CUresult rc, const char* what) { return cuda.ok(rc, what); };
  if (auto ok = step(cuda.ctx_retain(&context, *device), "cuDevicePrimaryCtxRetain"); !ok) {
    return std::unexpected(ok.error());
  }
  hold.retained = true;
  if (auto ok = step(cuda.ctx_set_current(context), "cuCtxSetCurrent"); !ok) {
    return std::unexpected(ok.error());
  }
  a.with_context = read_now(nvml, o.gpu, r);
  const size_t alloc_bytes = static_cast<size_t>(o.alloc_mib) << 20;
  if (auto ok = step(cuda.mem_alloc(&hold.pointer, alloc_bytes), "cuMemAlloc"); !ok) {
    return std::unexpected(ok.error());
  }
  // Writing every byte commits the pages, so the driver cannot report them lazily.
  if (auto ok = step(cuda.memset_d8(hold.pointer, 0xA5, alloc_bytes), "cuMemsetD8"); !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = step(cuda.ctx_synchronize(), "cuCtxSynchronize"); !ok) {
    return std::unexpected(ok.error());
  }
  a.allocated = read_now(nvml, o.gpu, r);
  a.smi_apps = run_command(fmt::format(
      "nvidia-smi --id={} --query-compute-apps=pid,used_memory --format=csv,noheader,nounits",
      o.gpu));
  const CUdeviceptr pointer = std::exchange(hold.pointer, 0);
  if (auto ok = step(cuda.mem_free(pointer), "cuMemFree"); !ok) return std::unexpected(ok.error());
  if (auto ok = step(cuda.ctx_synchronize(), "cuCtxSynchronize"); !ok) {
    return std::unexpected(ok.error());
  }
  a.freed = read_now(nvml, o.gpu, r);
  hold.retained = false;
  if (auto ok = step(cuda.ctx_release(*device), "cuDevicePrimaryCtxRelease"); !ok) {
    return std::unexpected(ok.error());
  }
  a.released = read_now(nvml, o.gpu, r);
  return a;
}

// `a` - `b` in MiB, or empty when either is missing.
std::optional<double> delta_mib(std::optional<uint64_t> a, std::optional<uint64_t> b) {
  if (!a || !b) return std::nullopt;
  return diff_mib(*a, *b);
}

// Formats an optional MiB figure for the report ("n/a" when missing).
std::string mib_text(std::optional<double> mib) {
  return mib ? fmt::format("{:.1f} MiB", *mib) : std::string("n/a");
}

// Records `name` as pass/fail by `got_mib` against `want_mib`, or skipped with `why_missing`.
void check_delta(Report& r, const std::string& name, std::optional<double> got_mib, double want_mib,
                 const std::string& why_missing) {
  if (!got_mib) {
    r.check(name, Status::skip, why_missing);
    return;
  }
  r.check(name, within(*got_mib, want_mib),
          fmt::format("{:.1f} MiB, expected {:.1f} MiB (tolerance {} MiB)", *got_mib, want_mib,
                      k_tolerance_mib));
}

// Judges the readings of the allocation check: context cost, allocation and free deltas of the
// device and of this process, and this process's memory in NVML vs nvidia-smi.
void evaluate_allocation(const AllocationReadings& a, const Options& o, Report& r) {
  const auto want_mib = static_cast<double>(o.alloc_mib);
  const auto context_mib = delta_mib(a.with_context.device_used_bytes, a.before.device_used_bytes);
  const auto alloc_mib = delta_mib(a.allocated.device_used_bytes, a.with_context.device_used_bytes);
  const auto process_alloc_mib =
      delta_mib(a.allocated.process_used_bytes, a.with_context.process_used_bytes);
  const auto free_mib = delta_mib(a.allocated.device_used_bytes, a.freed.device_used_bytes);
  const auto release_mib = delta_mib(a.released.device_used_bytes, a.before.device_used_bytes);
  const std::optional<double> nvml_process_mib =
      a.allocated.process_used_bytes
          ? std::optional<double>(to_mib(*a.allocated.process_used_bytes))
          : std::nullopt;
  const auto smi_mib = a.smi_apps ? smi_process_mib(*a.smi_apps) : std::nullopt;
  r.line(fmt::format("  context cost {} (device used); this process with the context alone {}",
                     mib_text(context_mib),
                     mib_text(a.with_context.process_used_bytes
                                  ? std::optional(to_mib(*a.with_context.process_used_bytes))
                                  : std::nullopt)));
  r.line(fmt::format("  device used after releasing the context minus before it: {}",
                     mib_text(release_mib)));

  const std::string not_listed =
      a.allocated.process_listed
          ? fmt::format("NVML lists pid {} without a memory figure", ::getpid())
          : fmt::format("pid {} is not among NVML's processes [{}] (a container's PID namespace?)",
                        ::getpid(), fmt::join(a.allocated.pids, ","));
  check_delta(r, "device used grows by the allocation", alloc_mib, want_mib, "NVML gave no used");
  check_delta(r, "this process's memory grows by the allocation", process_alloc_mib, want_mib,
              not_listed);
  if (!a.smi_apps) {
    r.check("this process's memory, NVML vs nvidia-smi", Status::skip,
            "nvidia-smi: " + a.smi_apps.error().message);
  } else if (!nvml_process_mib && !smi_mib) {
    r.check("this process's memory, NVML vs nvidia-smi", Status::skip,
            not_listed + "; nvidia-smi does not list it either");
  } else if (!nvml_process_mib || !smi_mib) {
    r.check("this process's memory, NVML vs nvidia-smi", Status::fail,
            fmt::format("NVML {}, nvidia-smi {}", mib_text(nvml_process_mib), mib_text(smi_mib)));
  } else {
    r.check("this process's memory, NVML vs nvidia-smi", within(*nvml_process_mib, *smi_mib),
            fmt::format("NVML {:.1f} MiB, nvidia-smi {:.0f} MiB", *nvml_process_mib, *smi_mib));
  }
  check_delta(r, "device used falls by the allocation after cuMemFree", free_mib, want_mib,
              "NVML gave no used");

  auto reading_json = [](const Reading& reading) {
    return json{{"device_used_bytes",
                 reading.device_used_bytes ? json(*reading.device_used_bytes) : json(nullptr)},
                {"process_used_bytes",
                 reading.process_used_bytes ? json(*reading.process_used_bytes) : json(nullptr)},
                {"pids", reading.pids}};
  };
  auto mib_json = [](std::optional<double> mib) { return mib ? json(*mib) : json(nullptr); };
  r.figures["allocation"] = {{"alloc_mib", o.alloc_mib},
                             {"before", reading_json(a.before)},
                             {"with_context", reading_json(a.with_context)},
                             {"allocated", reading_json(a.allocated)},
                             {"freed", reading_json(a.freed)},
                             {"released", reading_json(a.released)},
                             {"context_mib", mib_json(context_mib)},
                             {"device_alloc_delta_mib", mib_json(alloc_mib)},
                             {"process_alloc_delta_mib", mib_json(process_alloc_mib)},
                             {"nvml_process_mib", mib_json(nvml_process_mib)},
                             {"smi_process_mib", mib_json(smi_mib)},
                             {"device_free_delta_mib", mib_json(free_mib)},
                             {"release_vs_before_mib", mib_json(release_mib)}};
}

// Allocates `o.alloc_mib` MiB through the CUDA driver and checks what NVML sees; skipped when
// libcuda.so.1 is absent.
void check_known_allocation(gpu::MemorySource& nvml, const Options& o, Report& r) {
  r.line(fmt::format("Known allocation: cuMemAlloc of {} MiB on GPU {}", o.alloc_mib, o.gpu));
  auto cuda = open_cuda();
  if (!cuda) {
    r.check("known allocation",
            cuda.error().kind == ErrorKind::not_found ? Status::skip : Status::fail,
            cuda.error().message);
    return;
  }
  auto readings = allocate_and_measure(nvml, **cuda, o, r);
  if (!readings) {
    r.check("known allocation", Status::fail, readings.error().message);
    return;
  }
  evaluate_allocation(*readings, o, r);
}

// Process CPU time (user + system) so far, in µs.
double cpu_us_now() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// Calls `query` back to back for `seconds` and records calls/s and CPU µs per call as `name`;
// the check fails when any call failed.
template <class Query>
void measure_cost(const std::string& name, Query query, double seconds, Report& r) {
  const double cpu_start_us = cpu_us_now();
  const auto start = std::chrono::steady_clock::now();
  uint64_t calls = 0;
  uint64_t failures = 0;
  std::string last_error;
  std::chrono::duration<double> elapsed{};
  do {
    auto result = query();
    ++calls;
    if (!result) {
      ++failures;
      last_error = result.error().message;
    }
    elapsed = std::chrono::steady_clock::now() - start;
  } while (elapsed.count() < seconds);
  const double calls_per_s = static_cast<double>(calls) / elapsed.count();
  const double cpu_us_per_call = (cpu_us_now() - cpu_start_us) / static_cast<double>(calls);
  r.figures["sampling_cost"][name] = {{"calls", calls},
                                      {"failures", failures},
                                      {"calls_per_s", calls_per_s},
                                      {"wall_us_per_call", 1e6 / calls_per_s},
                                      {"cpu_us_per_call", cpu_us_per_call}};
  r.check(name + " in a loop", failures == 0 ? Status::pass : Status::fail,
          fmt::format("{:.0f} calls/s, {:.2f} us wall, {:.2f} us CPU per call{}", calls_per_s,
                      1e6 / calls_per_s, cpu_us_per_call,
                      failures == 0 ? std::string()
                                    : fmt::format("; {} of {} failed, last: {}", failures, calls,
                                                  last_error)));
}

// Measures sample_device and sample_processes (which takes a driver lock) for 1 s each.
void measure_sampling_cost(gpu::MemorySource& nvml, unsigned gpu, Report& r) {
  r.line("Sampling cost, 1 s each:");
  measure_cost(
      "sample_device", [&] { return nvml.sample_device(gpu); }, 1.0, r);
  measure_cost(
      "sample_processes", [&] { return nvml.sample_processes(gpu); }, 1.0, r);
}

}  // namespace

int main(int argc, char** argv) {
  auto options = parse_args(argc, argv);
  if (!options) {
    fmt::print(stderr, "bench_gpu_check: {}\n{}", options.error().message, k_usage);
    return 2;
  }
  if (options->help) {
    fmt::print("{}", k_usage);
    return 0;
  }
  auto nvml = gpu::NvmlSource::open();
  if (!nvml) {
    fmt::print(stderr, "skipped: {}\n", nvml.error().message);
    if (options->json) {
      fmt::print("{}\n", json{{"result", "skipped"}, {"reason", nvml.error().message}}.dump());
    }
    return 2;
  }
  Report report;
  report.print_text = !options->json;
  report.line(fmt::format("NVML from {}", (*nvml)->library_path()));
  if (auto ok = compare_with_smi(**nvml, options->gpu, report); !ok) {
    fmt::print(stderr, "bench_gpu_check: {}\n", ok.error().message);
    return 2;
  }
  check_known_allocation(**nvml, *options, report);
  measure_sampling_cost(**nvml, options->gpu, report);
  report.figures["checks"] = report.checks;
  report.figures["result"] = report.failed ? "fail" : "pass";
  if (options->json) fmt::print("{}\n", report.figures.dump(2));
  report.line(report.failed ? "result: FAIL" : "result: PASS");
  return report.failed ? 1 : 0;
}
