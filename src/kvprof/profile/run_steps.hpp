// Steps run_profile strings together (profiler.hpp): starting the samplers, stopping a launched
// server and watching its memory come back, the memory analysis of a finished run, and what a
// launch that never became ready leaves in its run folder.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/gpu/sampler.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/profile/profiler.hpp"
#include "kvprof/profile/startup.hpp"
#include "kvprof/profile/summary.hpp"
#include "kvprof/profile/timeline.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::profile {

// Starts GPU and host sampling into `dir` and `timeline` (none when there is nothing to sample);
// report.gpus and report.files are filled in. `launched_pid` is the host process when kvprof
// started the server.
Expected<std::unique_ptr<gpu::Sampler>> start_sampler(const ProfileConfig& config,
                                                      const ProfileDeps& deps,
                                                      const std::filesystem::path& dir,
                                                      std::optional<pid_t> launched_pid,
                                                      Timeline& timeline, ProfileReport& report);

// Stops the launched server and watches the GPU memory come back to its figure at launch (for
// at most release_wait_s).
void stop_launched(const LaunchSettings& settings, LaunchedServer& server, const Timeline& timeline,
                   bool have_memory, LaunchReport& launch);

// Fills the holes a stopped `sampler` left in the live readings from `source`'s history
// (gpu/gap_fill.hpp): the readings found join `timeline` and dir/gpu_mem_trace.csv, and
// report.gpu_gaps says what was missing and what was filled. Returns a warning line when a hole
// stays open.
std::optional<std::string> fill_memory_gaps(gpu::MemorySource& source, const gpu::Sampler& sampler,
                                            uint32_t interval_ms, const std::filesystem::path& dir,
                                            Timeline& timeline, ProfileReport& report);

// The measured breakdown of the busiest GPU (when memory was sampled), and the comparison with
// the estimate (its engine figures need only the server's gauges).
void analyse_memory(const ProfileConfig& config, const std::vector<MemoryPoint>& memory,
                    const std::vector<MetricsPoint>& metrics, Window load, Window post_warmup,
                    ProfileReport& report);

// A launched server that never became ready (it exited, timed out, or Ctrl-C came first): writes
// summary.json with `error`, "interrupted" and the startup timeline sampled so far, so what was
// measured is kept. Returns the write's error, if any.
Expected<void> write_failed_launch(const std::filesystem::path& dir, const ProfileReport& report,
                                   LaunchReport launch, StartupWatcher& watcher,
                                   const Timeline& timeline, const Error& error);

}  // namespace kvprof::profile
