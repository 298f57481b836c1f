// The engine side of `kvprof bench`: runs in a child process (so a crash inside libllama cannot
// take the run folder with it), loads the model, creates the context, runs each condition and
// reports every step to the parent as one JSON object per line on a pipe. llama.cpp's own log
// goes to engine.log, a line at a time.
#pragma once

#include <filesystem>

#include "kvprof/bench/bench_config.hpp"

namespace kvprof::bench {

// Events the worker writes ("ev" field): lib, phase, model, context, memory_breakdown,
// condition_start, request, condition_end, error, done.
// Runs the whole bench in this process, writing events to `event_fd` and the engine's log to
// `engine_log`; returns the process exit code (0 done, 1 failed, 130 interrupted).
int run_worker(const BenchConfig& config, int event_fd, const std::filesystem::path& engine_log);

}  // namespace kvprof::bench
