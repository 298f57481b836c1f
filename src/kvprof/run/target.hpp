// Where a run's engine and its memory come from — the built-in simulator, a server at an
// endpoint, one kvprof launches, or llama.cpp in-process (bench's worker) — opened in one place
// for profile, bench, find-max and sweep. A target gives the URL requests go to, the server
// command a profile run starts (when each run starts its own), and the GPU memory source that
// fits it: the simulator's own, this machine's NVML for a server or engine here, the node's
// monitoring (DCGM, Prometheus) for a server elsewhere, or one the caller already holds.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/gpu/source_select.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/profile/profiler.hpp"
#include "kvprof/sim/sim_config.hpp"
#include "kvprof/sim/sim_server.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::run {

// in_process: llama.cpp in a worker of this process (bench); no URL, this machine's GPUs.
enum class TargetKind { simulator, endpoint, launch, in_process };

// "built-in simulator", "endpoint", "launch", "in-process engine".
std::string_view target_kind_name(TargetKind kind);

// A server kvprof starts from a command template.
struct LaunchSpec {
  std::string command_template;  // {model} {port} {host} {max_concurrency} filled as shell words
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: a free port now
  double ready_timeout_s = 600;
  double grace_s = 15;
  std::string model;             // what {model} stands for (may be empty if it is not used)
  uint32_t max_concurrency = 1;  // what {max_concurrency} stands for
  // Fills the template for `host` and `port` itself when set (a sweep's entry has more
  // placeholders); otherwise the four above are filled.
  std::function<Expected<std::string>(const std::string& host, uint16_t port)> fill;
  // Start it once now and keep it for every run (find-max's trials), its output in `log_path`;
  // otherwise each profile run starts it and samples it from its first moment.
  bool start_now = false;
  std::filesystem::path log_path;
  std::string api_key;  // start_now: sent with the readiness checks
};

struct TargetSpec {
  TargetKind kind = TargetKind::endpoint;
  std::string endpoint;  // endpoint: the server's URL; launch: where it listens (empty: a port)
  LaunchSpec launch;
  sim::SimFlags sim;       // simulator: its flags (port 0)
  std::string sim_sizing;  // simulator: what sized it, when not its flags (e.g. a sweep's plan)
  // GPU memory of a server that is not simulated: the source the caller holds (borrowed; its
  // name and note below), else the --gpu-source kind opened for the server's endpoint.
  gpu::MemorySource* held_memory = nullptr;
  std::string held_memory_name = "none";
  std::string held_memory_note;
  std::optional<gpu::GpuSourceSpec> gpu_source;  // none and no held memory: not sampled
  std::string gpu_selector;
  uint32_t gpu_min_refresh_ms = 10;
};

class Target {
 public:
  Target() = default;
  ~Target();  // stops what it started
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  TargetKind kind = TargetKind::endpoint;
  std::string endpoint;  // where requests go (http://host:port/v1)
  // launch, not started now: the server each profile run starts (ProfileConfig::launch).
  std::optional<profile::LaunchSettings> launch;
  std::string launch_command;  // launch: the command with its placeholders filled
  pid_t started_pid = -1;      // launch, started now: its process (group leader)
  // simulator: its sizing in words and as JSON (sizing, gpu, jitter), for summary.json.
  std::string simulation;
  nlohmann::json simulation_details;
  // The GPU memory source (null: none), its name ("simulated", "nvml", "dcgm", "prometheus",
  // "none") and what the user should know about it.
  gpu::MemorySource* memory = nullptr;
  std::string memory_name = "none";
  std::string memory_note;
  bool memory_warn = false;    // print memory_note as a warning
  bool memory_remote = false;  // readings at the monitoring's pace (about a second)

  // Stops the simulator or the server started now (idempotent); the grace of the launch spec.
  void stop();

 private:
  friend Expected<std::unique_ptr<Target>> open_target(const TargetSpec&,
                                                       const std::function<bool()>&);
  std::unique_ptr<sim::SimServer> m_simulator;
  std::unique_ptr<profile::LaunchedServer> m_launched;
  std::unique_ptr<gpu::MemorySource> m_owned_memory;
  double m_grace_s = 15;
};

// Opens `spec`: starts the simulator (usage error for flags it refuses), fills a launch command
// (usage error for a bad placeholder) and, with start_now, starts it and waits until it answers
// (network error with the last lines of its log; interrupted when `should_stop` says so), opens
// the GPU memory source (errors of open_gpu_source). Nothing started is left running on error.
Expected<std::unique_ptr<Target>> open_target(const TargetSpec& spec,
                                              const std::function<bool()>& should_stop = {});

}  // namespace kvprof::run
