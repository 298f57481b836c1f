// What Slurm's commands print, read back with every length bounded: `scontrol show job -o` (one
// line of Key=Value pairs per job) and the `squeue -h -o '%i|%j|%T|%N|%r'` lines kvprof asks for.
#pragma once

#include <string_view>
#include <vector>

#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::scheduler {

// Output of Slurm's commands is read up to this size.
inline constexpr size_t k_max_slurm_output_bytes = 4u << 20;

// The jobs of `scontrol show job -o` output (one line each); an input error when a line has no
// JobId or JobState.
Expected<std::vector<JobStatus>> parse_scontrol_jobs(std::string_view text);

// The jobs of `squeue -h -o '%i|%j|%T|%N|%r'` output; malformed lines are an input error.
Expected<std::vector<JobStatus>> parse_squeue_jobs(std::string_view text);

// A Slurm job state as a phase: PENDING, CONFIGURING, REQUEUED... pending; RUNNING, COMPLETING,
// SUSPENDED... running; everything else ended.
JobPhase slurm_phase(std::string_view state);

}  // namespace kvprof::scheduler
