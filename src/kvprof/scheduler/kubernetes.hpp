// A sweep's jobs as Kubernetes manifests: the same job description the Slurm executor submits
// (scheduler::JobRequest), rendered as Indexed Jobs (batch/v1, completionMode Indexed) for
// `kubectl apply`. One Job per GPU count (a pod template has one `nvidia.com/gpu` limit): its
// completion index picks the configuration, the results folder is a PersistentVolumeClaim mounted
// at the same path the jobs write to. kvprof does not submit them itself.
#pragma once

#include <string>
#include <vector>

#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::scheduler {

struct KubernetesOptions {
  std::string name;        // the sweep's name; Jobs are kvprof-<name>-gpu<N>, made DNS-safe
  std::string image;       // a container image holding kvprof (the nodes' kvprof path inside it)
  std::string pvc;         // the PersistentVolumeClaim holding the results folder and sweep file
  std::string mount_path;  // where it is mounted: the folder the jobs' paths start with
  std::string name_space;  // metadata.namespace; empty: kubectl's current one
};

// The manifests (YAML documents separated by ---) that run `requests` as Indexed Jobs. A usage
// error when an option is missing or a request's paths are not under mount_path (the pod would
// not see them).
Expected<std::string> kubernetes_manifests(const std::vector<JobRequest>& requests,
                                           const KubernetesOptions& options);

// `text` as a DNS-1123 label (lower-case letters, digits and '-', at most 63, starting and ending
// with a letter or digit), for Job and container names.
std::string dns_label(std::string_view text);

}  // namespace kvprof::scheduler
