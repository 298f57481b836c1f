// run_profile: drives an OpenAI-compatible server through a workload grid while the GPU sampler,
// the host sampler and the /metrics scraper record on one clock, then writes results/<run_id>/:
// workload.jsonl, request_trace.csv, gpu_mem_trace.csv, host_mem_trace.csv (when a host process
// is sampled), metrics_trace.csv, summary.json and manifest.json.
//
// Phases: [launch the server and wait for it, sampling from its start: server.log and the startup
// timeline] -> probe the server (a clear error within ~5 s when it is down; a one-token completion,
// endpoint_check.hpp) -> baseline window (no load) -> warmup requests (all failing stops the run)
// -> post-warmup window -> the grid, condition by condition -> [stop the launched server, watch its
// memory come back] -> analysis, with the engine's own figures from its log.
// A stop request (Ctrl-C) ends the grid early; everything measured is still analysed and written,
// with "interrupted": true.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/client/runner.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/estimate/result.hpp"
#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/profile/summary.hpp"
#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::profile {

// `--launch`: the server command kvprof starts, watches and stops itself.
struct LaunchSettings {
  std::string command;  // placeholders already filled (fill_placeholders in launcher.hpp)
  std::string host = "127.0.0.1";
  uint16_t port = 0;             // where it will listen (the endpoint's port)
  double ready_timeout_s = 600;  // for /health or /v1/models to answer
  double grace_s = 15;           // SIGTERM to SIGKILL
  double release_wait_s = 10;    // how long to watch GPU memory come back after the stop
};

struct ProfileConfig {
  workload::GridOptions grid;
  client::RunOptions run;      // endpoint; model empty = the server's first model
  std::vector<unsigned> gpus;  // GPUs to sample; empty = all
  uint32_t gpu_interval_ms = 20;
  uint32_t process_interval_ms = 500;
  std::optional<pid_t> host_pid;  // sample this process's host memory
  bool host_pid_auto = true;      // else: the pid listening on a loopback endpoint's port
  uint32_t host_interval_ms = 100;
  uint32_t metrics_interval_ms = 100;  // 0: automatic, from min_condition_s (condition_metrics.hpp)
  double min_condition_s = 0;          // repeat a condition's requests until it lasts this long
  std::filesystem::path output_dir = "results";
  std::string run_tag;                         // appended to the run id
  double baseline_s = 1.0;                     // idle window before any request
  uint32_t warmup_requests = 2;                // small requests before the grid (not in the trace)
  double post_warmup_s = 0.5;                  // idle window after the warmup
  std::optional<estimate::Estimate> estimate;  // compare the measurement with this plan
  std::string estimate_flags;                  // how it was asked for (manifest, summary)
  std::string simulation;        // non-empty when the server is the built-in simulator: its sizing
  nlohmann::json configuration;  // what the user asked for, for the manifest (no secrets)
  std::optional<LaunchSettings> launch;  // start the server (see LaunchSettings)
  std::filesystem::path server_log;      // the log of a server started elsewhere, parsed at the end
  // Conditions an earlier run of the same configuration measured to their end (a resumed sweep):
  // their requests are not sent and the workload file leaves them out.
  std::set<std::string> skip_conditions;

  // The simulator's sizing as JSON (with its engine jitter), and what the estimate assumed
  // (estimate_check.hpp), both for summary.json.
  nlohmann::json simulation_details;
  nlohmann::json estimate_assumptions;
};

struct ProfileDeps {
  gpu::MemorySource* memory = nullptr;  // null: no GPU sampling
  std::string memory_source = "none";   // "nvml", "dcgm", "prometheus", "simulated", "none"
  std::string memory_note;              // why there is no source, for the summary
  std::function<std::unique_ptr<client::Transport>()> make_transport;  // default: libcurl
  std::function<bool()> should_stop;                                   // e.g. Ctrl-C
  std::function<void(const std::string&)> on_progress;  // one line per event; null = quiet
  std::function<void(const std::string&)> on_status;    // a status the next replaces; null = none
  std::function<void(const client::RequestRecord&)> on_request;  // each grid request as it ends
  // Each grid condition that ran to its end, with the seconds it took.
  std::function<void(const std::string& condition_id, double seconds)> on_condition_end;
};

struct ProfileOutcome {
  std::filesystem::path run_dir;
  ProfileReport report;
  nlohmann::json summary;
  std::string text;  // the terminal summary
  bool interrupted = false;
  RequestTotals totals;
};

// Runs the profile. Errors: usage (bad grid or options), network (server unreachable or refusing
// the probe before anything is written; a launched server that exits, never answers or finds its
// port taken, with the last lines of its log), io (the run directory or a trace cannot be written:
// what was written stays readable). Request failures are not errors: they are in the trace and the
// totals.
Expected<ProfileOutcome> run_profile(const ProfileConfig& config, const ProfileDeps& deps);

// A fresh run id: UTC "YYYYmmdd_HHMMSS" plus "_<tag>" (tag reduced to [A-Za-z0-9._-]).
std::string make_run_id(const std::string& tag, double unix_s);

}  // namespace kvprof::profile
