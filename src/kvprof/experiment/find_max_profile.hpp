// find-max trials as profile runs: each step runs profile::run_profile in this process against
// an OpenAI-compatible server with one condition (input x output at the step's concurrency), in
// its own run folder under the search's folder, and reads the outcome from its report and from
// every request's timing (a request whose first token came after another request had ended was
// queued behind it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "kvprof/client/request_record.hpp"
#include "kvprof/client/runner.hpp"
#include "kvprof/experiment/find_max.hpp"
#include "kvprof/profile/profiler.hpp"

namespace kvprof::experiment {

struct ProfileTrialSettings {
  client::RunOptions run;            // endpoint, model, key
  std::filesystem::path output_dir;  // the search's folder: each step's run goes inside
  uint32_t input_len = 0;
  uint32_t output_len = 0;
  uint32_t waves = 1;  // requests per step = waves x concurrency
  uint64_t seed = 42;
  double baseline_s = 0.2;
  uint32_t warmup_requests = 1;
  double post_warmup_s = 0.1;
  uint32_t metrics_interval_ms = 20;
  uint32_t gpu_interval_ms = 20;
  std::vector<unsigned> gpus;
  bool sample_host = true;  // the server's host memory when it runs on this machine
};

// Requests that were queued: those whose first token arrived after another request of the same
// step had ended while they waited (ended between their send and their first token).
uint32_t count_queued(const std::vector<client::RequestRecord>& records);

// A Trial running each step as a profile run with `deps` (memory source, transport, stop flag;
// its on_request is replaced). The trial's error is the profile's (e.g. the server went away).
Trial make_profile_trial(const ProfileTrialSettings& settings, const profile::ProfileDeps& deps);

}  // namespace kvprof::experiment
