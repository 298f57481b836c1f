// Sampler: background threads that record GPU and host memory over time into CSV traces, on a
// steady schedule (sample k is due at start + k * interval, so no drift; a late sample is taken
// at once and the slots it overran are counted as missed, never replayed).
//
// GPU trace (gpu_mem_trace.csv), header k_gpu_trace_header:
//   t_mono_ns,t_wall_ms,kind,gpu,pid,total_bytes,reserved_bytes,free_bytes,used_bytes
//   kind=device:  one row per GPU per interval_ms; pid empty; reserved_bytes empty when the driver
//                 only has the v1 query (then used_bytes includes the reserved memory).
//   kind=process: one row per compute process per GPU every process_interval_ms; only pid and
//                 used_bytes (the process's GPU memory) are set.
// Host trace (host_mem_trace.csv), header k_host_trace_header:
//   t_mono_ns,t_wall_ms,pid,rss_bytes,pss_bytes
// t_mono_ns: CLOCK_MONOTONIC (steady_clock) ns, taken just before the query; t_wall_ms: Unix
// epoch ms. An empty cell means "not available", never 0. Every row is in the kernel (write(2))
// before the next sample starts, so a crash loses nothing already sampled.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/gpu/trace_file.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

inline constexpr const char* k_gpu_trace_header =
    "t_mono_ns,t_wall_ms,kind,gpu,pid,total_bytes,reserved_bytes,free_bytes,used_bytes";
inline constexpr const char* k_host_trace_header = "t_mono_ns,t_wall_ms,pid,rss_bytes,pss_bytes";

// One device reading with its timestamps.
struct DeviceSample {
  int64_t t_mono_ns = 0;
  int64_t t_wall_ms = 0;
  DeviceMemory memory;
};

// The gpu_mem_trace.csv row (kind=device, '\n'-terminated) of one reading.
std::string device_trace_row(const DeviceSample& sample);

struct SamplerOptions {
  std::vector<unsigned> gpus;          // GPUs to sample; empty = every GPU of the source
  uint32_t interval_ms = 20;           // device memory period, >= 1
  uint32_t process_interval_ms = 500;  // per-process GPU memory period; 0 = off
  std::string gpu_trace_path;          // device/process rows; empty = no GPU sampling
  std::optional<pid_t> host_pid;       // sample this process's host memory
  bool host_pid_is_group = false;      // host_pid is a process group: sum its processes
  uint32_t host_interval_ms = 100;     // host memory period, >= 1
  std::string host_trace_path;         // host rows; required with host_pid
  // Called on the sampler thread after each device reading; must return quickly.
  std::function<void(const DeviceSample&)> on_device_sample;
  // Called on the host thread after each host reading (steady-clock ns); must return quickly.
  std::function<void(int64_t t_mono_ns, const sys::HostMemory&)> on_host_sample;
};

// Latest reading and running peak of one GPU.
struct GpuPeak {
  unsigned gpu = 0;
  std::optional<DeviceSample> latest;
  std::optional<uint64_t> peak_used_bytes;  // max used_bytes seen
  int64_t peak_t_mono_ns = 0;
  uint64_t samples = 0;
};

// Latest reading and running peaks of the host process.
struct HostPeak {
  pid_t pid = 0;
  std::optional<sys::HostMemory> latest;
  int64_t latest_t_mono_ns = 0;
  std::optional<uint64_t> peak_rss_bytes;
  std::optional<uint64_t> peak_pss_bytes;
  uint64_t samples = 0;
  bool exited = false;         // the process went away; host sampling stopped
  bool process_group = false;  // pid is a process group whose processes are summed
};

struct SamplerStats {
  uint64_t device_rows = 0;
  uint64_t process_rows = 0;
  uint64_t host_rows = 0;
  uint64_t missed_ticks = 0;     // device slots skipped because a sample overran
  uint64_t failed_queries = 0;   // driver or /proc queries that failed (no row written)
  std::string last_query_error;  // the last of those failures
};

class Sampler {
 public:
  // `source` may be null for host-only sampling; it must outlive the Sampler.
  Sampler(MemorySource* source, SamplerOptions options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Validates the options (usage error), checks the GPUs exist (usage/driver error), creates the
  // trace files with their headers (io error) and starts sampling; the first device row is
  // taken at once.
  Expected<void> start();

  // Stops the threads, joins them and closes the files (idempotent). Returns the error that
  // stopped sampling early (a failed write: io), or success.
  Expected<void> stop();

  // True once sampling stopped by itself because a trace could not be written.
  [[nodiscard]] bool failed() const { return m_failed.load(); }
  // True once the host process exited (host sampling has stopped).
  [[nodiscard]] bool host_exited() const { return m_host_exited.load(); }

  // Latest reading and peak of each sampled GPU, in option order (thread-safe).
  [[nodiscard]] std::vector<GpuPeak> gpu_peaks() const;
  // Latest reading and peaks of the host process, when one is sampled (thread-safe).
  [[nodiscard]] std::optional<HostPeak> host_peak() const;
  // Row and failure counts so far (thread-safe).
  [[nodiscard]] SamplerStats stats() const;
  // When start() began (steady-clock ns; 0 before).
  [[nodiscard]] int64_t started_mono_ns() const { return m_started_mono_ns; }
  // The GPUs being sampled (after start(): the resolved list).
  [[nodiscard]] const std::vector<unsigned>& gpus() const { return m_options.gpus; }

 private:
  void device_loop();
  void host_loop();
  bool wait_until_due(std::chrono::steady_clock::time_point due);  // true: stop requested
  bool sample_devices_once();                                      // false: fatal write error
  bool sample_processes_once();                                    // false: fatal write error
  void record_failure(const Error& error);
  void record_fatal(const Error& error);

  MemorySource* m_source = nullptr;
  SamplerOptions m_options;
  TraceFile m_gpu_trace;
  TraceFile m_host_trace;
  sys::ProcSource m_proc;

  std::thread m_device_thread;
  std::thread m_host_thread;
  std::mutex m_wait_mutex;
  std::condition_variable m_wait_cv;
  bool m_stop = false;  // guarded by m_wait_mutex
  bool m_started = false;
  int64_t m_started_mono_ns = 0;

  std::atomic<bool> m_failed{false};
  std::atomic<bool> m_host_exited{false};
  mutable std::mutex m_state_mutex;  // guards what follows
  std::map<unsigned, GpuPeak> m_peaks;
  std::optional<HostPeak> m_host;
  SamplerStats m_stats;
  std::optional<Error> m_fatal;
};

}  // namespace kvprof::gpu
