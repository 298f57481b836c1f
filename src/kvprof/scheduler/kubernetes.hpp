// A sweep's jobs on Kubernetes: the same job description the Slurm executor submits
// (scheduler::JobRequest), either rendered as Indexed Jobs (batch/v1, completionMode Indexed)
// for `kubectl apply` (--dry-run: one Job per GPU count, as a pod template has one
// `nvidia.com/gpu` limit; its completion index picks the configuration), or submitted one Job per
// configuration through kubectl (KubernetesScheduler). Either way the results folder is a
// PersistentVolumeClaim mounted at the same path the jobs write to.
#pragma once

#include <memory>
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

// A usage error when a Job needs an option that is missing (--k8s-image, --k8s-pvc,
// --k8s-mount-path) or the mount path is not absolute.
Expected<void> check_kubernetes_options(const KubernetesOptions& options);

// A usage error when a file `request` reads or writes is not under the mount path (its pod would
// not see it).
Expected<void> check_on_volume(const JobRequest& request, const KubernetesOptions& options);

// The shell lines a pod runs for `request`: its log, its folder, a line naming the job (`which`:
// how the pod was picked) and the command, each word quoted.
std::string pod_script_lines(const JobRequest& request, std::string_view which);

// Kubernetes as a JobScheduler: kubectl create, get and delete run as programs (kubectl from
// PATH with its own configuration: KUBECONFIG, the current context). A job is a Job of one pod
// (backoffLimit 0: kvprof records a failure, Kubernetes does not retry it), named by a DNS label
// of kvprof's job name and annotated with the whole name.
class KubernetesScheduler final : public JobScheduler {
 public:
  // not_found (saying how to get kubectl) when kubectl is not in PATH; a usage error when an
  // option the Jobs need is missing (--k8s-image, --k8s-pvc, --k8s-mount-path).
  static Expected<std::unique_ptr<KubernetesScheduler>> open(KubernetesOptions options);

  [[nodiscard]] std::string name() const override { return "kubernetes"; }
  [[nodiscard]] std::string script_suffix() const override { return ".json"; }
  // The Job as JSON (kubectl takes it as a manifest); a usage error for a job of several nodes
  // or one whose files are not under the mount path.
  [[nodiscard]] Expected<std::string> batch_script(const JobRequest& request) const override;
  Expected<std::string> submit(const std::filesystem::path& script_path) override;
  Expected<std::vector<JobStatus>> list(std::string_view name_prefix) override;
  Expected<JobStatus> status(const std::string& id) override;
  Expected<void> cancel(const std::vector<std::string>& ids) override;

 private:
  explicit KubernetesScheduler(KubernetesOptions options) : m_options(std::move(options)) {}
  // kubectl with the namespace option first, then `args`.
  [[nodiscard]] std::vector<std::string> kubectl(std::vector<std::string> args) const;
  KubernetesOptions m_options;
};

// The Job name kvprof gives the job `job_name`: a DNS label of at most 63 characters, the same
// name each time, two names apart never the same Job (a hash of the whole name ends any name
// that is not a DNS label already).
std::string kubernetes_job_name(std::string_view job_name);

// `text` as a DNS-1123 label (lower-case letters, digits and '-', at most 63, starting and ending
// with a letter or digit), for Job and container names.
std::string dns_label(std::string_view text);

}  // namespace kvprof::scheduler
