// What `kubectl get ... -o json` prints about kvprof's Jobs and their pods, read back with every
// length bounded and every field's type checked: a Job's phase, its kvprof name, its node and
// how its pod ended (an OOM kill, a deadline, a failed script).
#pragma once

#include <string_view>
#include <vector>

#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::scheduler {

// kubectl's answers are read up to this size.
inline constexpr size_t k_max_kubectl_output_bytes = 16u << 20;

// The annotation that holds a Job's kvprof name (Kubernetes names are DNS labels of 63
// characters; kvprof's job names are longer and find a Job again by their prefix).
inline constexpr std::string_view k_kvprof_name_annotation = "kvprof/name";

// The Jobs of `kubectl get jobs -o json` (a List): their phases from the Jobs alone (node and
// exit code need the pods, see parse_kubectl_job). An input error when it is not such a List.
Expected<std::vector<JobStatus>> parse_kubectl_jobs(std::string_view json_text);

// One Job (`kubectl get job NAME -o json`) with its pods (`kubectl get pods -l job-name=NAME -o
// json`): RUNNING once a pod runs; COMPLETED, FAILED (its script's exit code), OUT_OF_MEMORY (the
// container was OOMKilled) or TIMEOUT (activeDeadlineSeconds) once ended.
Expected<JobStatus> parse_kubectl_job(std::string_view job_json, std::string_view pods_json);

}  // namespace kvprof::scheduler
