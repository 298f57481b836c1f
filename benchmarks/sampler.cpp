// Cost of one memory reading (Google Benchmark) and the rate a Sampler achieves at a 1 ms
// interval with the CPU time it spends per sample, for the /proc host sampler and for NVML
// through the fake library (build/fake_nvml/libnvidia-ml.so.1), or the library $KVPROF_NVML_LIBRARY
// names (libnvidia-ml.so.1 on a GPU machine: the rows are then labelled with that name).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kvprof/gpu/nvml.hpp"
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/sys/proc.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kvprof;

// The NVML library to measure: $KVPROF_NVML_LIBRARY, else the fake one next to this build.
std::string nvml_path() {
  if (const char* env = std::getenv(gpu::k_nvml_library_env)) return env;
  return (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "fake_nvml" /
          "libnvidia-ml.so.1")
      .string();
}

void BM_ProcSmapsRollup(benchmark::State& state) {
  sys::ProcSource source;
  const pid_t pid = ::getpid();
  for (auto _ : state)
    benchmark::DoNotOptimize(source.sample(pid));
}
BENCHMARK(BM_ProcSmapsRollup);

void BM_ProcStatusVmRss(benchmark::State& state) {
  const std::string path = fmt::format("/proc/{}/status", ::getpid());
  for (auto _ : state) {
    auto text = sys::read_text_file(path);
    benchmark::DoNotOptimize(sys::parse_proc_status(*text));
  }
}
BENCHMARK(BM_ProcStatusVmRss);

// How the report names the NVML library measured: "fake NVML" or the library's name.
std::string nvml_label() {
  const char* env = std::getenv(gpu::k_nvml_library_env);
  return env != nullptr ? fmt::format("NVML ({})", env) : std::string("fake NVML");
}

void BM_NvmlSampleDevice(benchmark::State& state) {
  auto nvml = gpu::NvmlSource::open(nvml_path());
  if (!nvml) {
    state.SkipWithError(nvml.error().message.c_str());
    return;
  }
  state.SetLabel(nvml_label());
  for (auto _ : state)
    benchmark::DoNotOptimize((*nvml)->sample_device(0));
}
BENCHMARK(BM_NvmlSampleDevice);

// Sampler at `interval_ms` for `seconds`; prints rows/s and process CPU time per row.
void measure_rate(const char* label, gpu::MemorySource* source, bool host, double seconds) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvprof_bench_{}", ::getpid());
  fs::create_directories(dir);
  gpu::SamplerOptions options;
  options.interval_ms = 1;
  options.host_interval_ms = 1;
  options.process_interval_ms = 0;
  if (source != nullptr) options.gpu_trace_path = (dir / "gpu.csv").string();
  if (host) {
    options.host_pid = ::getpid();
    options.host_trace_path = (dir / "host.csv").string();
  }
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  gpu::Sampler sampler(source, options);
  if (auto ok = sampler.start(); !ok) {
    fmt::print("{}: {}\n", label, ok.error().message);
    return;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  (void)sampler.stop();
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  auto cpu_us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
  };
  const auto stats = sampler.stats();
  const uint64_t rows = host ? stats.host_rows : stats.device_rows;
  fmt::print("{:<34} {:>8.0f} samples/s (target 1000), {:>6.1f} us CPU/sample, {} missed slots\n",
             label, rows / seconds, (cpu_us(after) - cpu_us(before)) / std::max<uint64_t>(rows, 1),
             stats.missed_ticks);
  fs::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  fmt::print("\nSampler at a 1 ms interval, 2 s each:\n");
  measure_rate("host /proc (smaps_rollup)", nullptr, true, 2.0);
  auto nvml = gpu::NvmlSource::open(nvml_path());
  if (!nvml) {
    fmt::print("{}: {}\n", nvml_label(), nvml.error().message);
    return 0;
  }
  measure_rate(fmt::format("{}, GPU 0", nvml_label()).c_str(), nvml->get(), false, 2.0);
  return 0;
}
