// Kubernetes through kubectl (see KubernetesScheduler in kubernetes.hpp).
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kvprof/scheduler/kubectl_json.hpp"
#include "kvprof/scheduler/kubernetes.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::scheduler {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

Expected<sys::CommandResult> run_kubectl(const std::vector<std::string>& argv) {
  sys::CommandOptions o;
  o.timeout = 60s;
  o.max_output_bytes = k_max_kubectl_output_bytes;
  auto r = sys::run_command(argv, o);
  if (!r) return std::unexpected(r.error());
  if (r->timed_out) {
    return fail(ErrorKind::io,
                "kubectl did not answer in 60 s (does it reach the cluster? "
                "try `kubectl get nodes`)");
  }
  return r;
}

}  // namespace

std::string kubernetes_job_name(std::string_view job_name) {
  const std::string label = dns_label(job_name);
  if (label == job_name) return label;
  // Lower-casing, punctuation and the 63 characters lose information: a stable hash of the
  // whole name (FNV-1a) keeps two names apart ("a_b" and "a.b", "Grid" and "grid").
  uint64_t h = 1469598103934665603ULL;
  for (const char c : job_name)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  std::string head = label.substr(0, 50);
  while (!head.empty() && head.back() == '-')
    head.pop_back();
  return fmt::format("{}-{:012x}", head, h & 0xffffffffffffULL);
}

Expected<std::unique_ptr<KubernetesScheduler>> KubernetesScheduler::open(
    KubernetesOptions options) {
  const char* path = std::getenv("PATH");
  if (!sys::find_executable("kubectl", path != nullptr ? path : "/usr/bin:/bin")) {
    return fail(ErrorKind::not_found,
                "--executor kubernetes: kubectl was not found in PATH; run kvprof where kubectl "
                "reaches the cluster, or write the manifests with --dry-run and apply them");
  }
  if (auto ok = check_kubernetes_options(options); !ok) return std::unexpected(ok.error());
  return std::unique_ptr<KubernetesScheduler>(new KubernetesScheduler(std::move(options)));
}

std::vector<std::string> KubernetesScheduler::kubectl(std::vector<std::string> args) const {
  std::vector<std::string> argv = {"kubectl"};
  if (!m_options.name_space.empty()) {
    argv.push_back("--namespace");
    argv.push_back(dns_label(m_options.name_space));
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Expected<std::string> KubernetesScheduler::batch_script(const JobRequest& request) const {
  if (request.command.empty()) return fail(ErrorKind::internal, "a job without a command");
  if (request.nodes > 1) {
    return fail(ErrorKind::usage,
                fmt::format("{} needs {} nodes: a Kubernetes Job of kvprof runs in one pod "
                            "(use --executor slurm for pipeline stages over several nodes)",
                            request.name, request.nodes));
  }
  if (auto ok = check_on_volume(request, m_options); !ok) return std::unexpected(ok.error());
  const std::string name = kubernetes_job_name(request.name);
  json container = {
      {"name", "kvprof"},
      {"image", m_options.image},
      {"command", {"/bin/bash", "-c"}},
      {"args", {"set -u\n" + pod_script_lines(request, "job " + name)}},
      // The run inside says which job it was (its result is matched to the Job by this).
      {"env",
       {{{"name", "KVPROF_JOB_ID"}, {"value", name}},
        {{"name", "KVPROF_NODE_NAME"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}}}},
      {"volumeMounts", {{{"name", "results"}, {"mountPath", m_options.mount_path}}}}};
  if (request.gpus > 0) container["resources"] = {{"limits", {{"nvidia.com/gpu", request.gpus}}}};
  const json job = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata",
       {{"name", name},
        {"labels", {{"app.kubernetes.io/name", "kvprof"}}},
        {"annotations",
         {{std::string(k_kvprof_name_annotation), request.name},
          {"kvprof/comment", request.comment.substr(0, 200)}}}}},
      {"spec",
       {{"backoffLimit", 0},
        {"template",
         {{"metadata", {{"labels", {{"app.kubernetes.io/name", "kvprof"}}}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"containers", {container}},
            {"volumes",
             {{{"name", "results"},
               {"persistentVolumeClaim", {{"claimName", dns_label(m_options.pvc)}}}}}}}}}}}}};
  return json_text(job, 2) + "\n";
}

Expected<std::string> KubernetesScheduler::submit(const std::filesystem::path& script_path) {
  auto r = run_kubectl(kubectl({"create", "-f", script_path.string(), "-o", "name"}));
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) return fail(ErrorKind::io, "kubectl refused the job: " + r->first_line());
  // "job.batch/<name>".
  std::string id = r->stdout_text.substr(0, r->stdout_text.find('\n'));
  if (const size_t slash = id.rfind('/'); slash != std::string::npos) id = id.substr(slash + 1);
  if (id.empty() || id.size() > 63 || dns_label(id) != id) {
    return fail(ErrorKind::io,
                fmt::format("kubectl answered '{}', not a Job's name", id.substr(0, 64)));
  }
  return id;
}

Expected<std::vector<JobStatus>> KubernetesScheduler::list(std::string_view name_prefix) {
  auto r =
      run_kubectl(kubectl({"get", "jobs", "-l", "app.kubernetes.io/name=kvprof", "-o", "json"}));
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) return fail(ErrorKind::io, "kubectl get jobs: " + r->first_line());
  auto jobs = parse_kubectl_jobs(r->stdout_text);
  if (!jobs) return jobs;
  // Those the cluster still runs or has not started: an ended one is collected by its id.
  std::erase_if(*jobs, [&](const JobStatus& j) {
    return !j.name.starts_with(name_prefix) || j.phase == JobPhase::ended;
  });
  return jobs;
}

Expected<JobStatus> KubernetesScheduler::status(const std::string& id) {
  auto job = run_kubectl(kubectl({"get", "job", id, "-o", "json"}));
  if (!job) return std::unexpected(job.error());
  if (job->exit_code != 0) {
    const std::string said = job->first_line();
    if (said.find("NotFound") != std::string::npos || said.find("not found") != std::string::npos)
      return fail(ErrorKind::not_found, fmt::format("Kubernetes no longer knows Job {}", id));
    return fail(ErrorKind::io, "kubectl get job: " + said);
  }
  auto pods = run_kubectl(kubectl({"get", "pods", "-l", "job-name=" + id, "-o", "json"}));
  if (!pods) return std::unexpected(pods.error());
  if (pods->exit_code != 0) return fail(ErrorKind::io, "kubectl get pods: " + pods->first_line());
  return parse_kubectl_job(job->stdout_text, pods->stdout_text);
}

Expected<void> KubernetesScheduler::cancel(const std::vector<std::string>& ids) {
  if (ids.empty()) return {};
  std::vector<std::string> args = {"delete", "job", "--ignore-not-found", "--wait=false"};
  args.insert(args.end(), ids.begin(), ids.end());
  auto r = run_kubectl(kubectl(args));
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) return fail(ErrorKind::io, "kubectl delete job: " + r->first_line());
  return {};
}

}  // namespace kvprof::scheduler
