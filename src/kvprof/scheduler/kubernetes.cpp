// A sweep's jobs as Kubernetes Indexed Jobs (see kubernetes.hpp).
#include "kvprof/scheduler/kubernetes.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <map>

#include "kvprof/util/shell.hpp"

namespace kvprof::scheduler {

namespace {

// The shell script every pod of one Job runs: its completion index picks the command.
std::string index_script(const std::vector<const JobRequest*>& requests) {
  std::string s = "set -u\ncase \"$JOB_COMPLETION_INDEX\" in\n";
  for (size_t i = 0; i < requests.size(); ++i) {
    s += fmt::format("  {})\n", i);
    std::string lines = pod_script_lines(*requests[i], "index $JOB_COMPLETION_INDEX");
    for (size_t at = 0; at < lines.size();) {
      const size_t end = lines.find('\n', at);
      s += "    " + lines.substr(at, end - at + 1);
      at = end + 1;
    }
    s += "    ;;\n";
  }
  s += "  *)\n    echo \"no configuration for index $JOB_COMPLETION_INDEX\" >&2\n    exit 2\n"
       "    ;;\nesac\n";
  return s;
}

// Whether `path` lies under `root` (both absolute, compared word by word).
bool path_under(const std::filesystem::path& path, const std::filesystem::path& root) {
  const auto p = path.lexically_normal(), r = root.lexically_normal();
  auto pi = p.begin();
  for (auto ri = r.begin(); ri != r.end(); ++ri, ++pi) {
    if (ri->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *ri) return false;
  }
  return true;
}

}  // namespace

std::string pod_script_lines(const JobRequest& r, std::string_view which) {
  std::string s;
  if (!r.log_path.empty()) s += "exec >>" + shell_quote(r.log_path.string()) + " 2>&1\n";
  if (!r.work_dir.empty()) s += "cd " + shell_quote(r.work_dir.string()) + "\n";
  s += fmt::format("echo \"kvprof job $HOSTNAME {}: {}\"\n", which, r.name);
  s += "exec";
  for (const auto& w : r.command)
    s += " " + shell_quote(w);
  return s + "\n";
}

Expected<void> check_on_volume(const JobRequest& r, const KubernetesOptions& options) {
  const std::filesystem::path mount(options.mount_path);
  std::vector<std::filesystem::path> paths = r.shared_paths;
  paths.push_back(r.log_path);
  for (const auto& p : paths) {
    if (!p.empty() && !path_under(p, mount)) {
      return fail(ErrorKind::usage,
                  fmt::format("{} is not under --k8s-mount-path {}: the pods would not see it; "
                              "put the results folder and the sweep file on the volume",
                              p.string(), options.mount_path));
    }
  }
  return {};
}

Expected<void> check_kubernetes_options(const KubernetesOptions& options) {
  for (const auto& [flag, value] :
       {std::pair{"--k8s-image", &options.image}, std::pair{"--k8s-pvc", &options.pvc},
        std::pair{"--k8s-mount-path", &options.mount_path}}) {
    if (value->empty()) {
      return fail(ErrorKind::usage,
                  fmt::format("--executor kubernetes needs {} (see kvprof sweep --help)", flag));
    }
  }
  if (!std::filesystem::path(options.mount_path).is_absolute()) {
    return fail(ErrorKind::usage,
                fmt::format("--k8s-mount-path {}: not an absolute path", options.mount_path));
  }
  return {};
}

std::string dns_label(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::isalnum(static_cast<unsigned char>(l)) != 0) {
      out += l;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 63) break;
  }
  while (!out.empty() && out.back() == '-')
    out.pop_back();
  return out.empty() ? "kvprof" : out;
}

Expected<std::string> kubernetes_manifests(const std::vector<JobRequest>& requests,
                                           const KubernetesOptions& options) {
  if (auto ok = check_kubernetes_options(options); !ok) return std::unexpected(ok.error());
  // One Job per GPU count: a pod template has one GPU limit.
  std::map<unsigned, std::vector<const JobRequest*>> by_gpus;
  for (const auto& r : requests) {
    if (auto ok = check_on_volume(r, options); !ok) return std::unexpected(ok.error());
    by_gpus[r.gpus].push_back(&r);
  }
  YAML::Emitter out;
  out.SetIndent(2);
  bool first = true;
  for (const auto& [gpus, group] : by_gpus) {
    if (!first) out << YAML::Newline;
    first = false;
    out << YAML::BeginDoc << YAML::BeginMap;
    out << YAML::Key << "apiVersion" << YAML::Value << "batch/v1";
    out << YAML::Key << "kind" << YAML::Value << "Job";
    out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value
        << dns_label(fmt::format("kvprof-{}", options.name).substr(0, 54)) +
               fmt::format("-gpu{}", gpus);
    if (!options.name_space.empty())
      out << YAML::Key << "namespace" << YAML::Value << dns_label(options.name_space);
    out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "app.kubernetes.io/name" << YAML::Value << "kvprof";
    out << YAML::Key << "kvprof/sweep" << YAML::Value << dns_label(options.name);
    out << YAML::EndMap << YAML::EndMap;
    out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "completionMode" << YAML::Value << "Indexed";
    out << YAML::Key << "completions" << YAML::Value << group.size();
    out << YAML::Key << "parallelism" << YAML::Value << group.size();
    // A configuration that fails is recorded by kvprof, not retried by Kubernetes.
    out << YAML::Key << "backoffLimit" << YAML::Value << 0;
    out << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap << YAML::Key << "labels"
        << YAML::Value << YAML::BeginMap << YAML::Key << "app.kubernetes.io/name" << YAML::Value
        << "kvprof" << YAML::EndMap << YAML::EndMap;
    out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "restartPolicy" << YAML::Value << "Never";
    out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << "kvprof";
    out << YAML::Key << "image" << YAML::Value << options.image;
    out << YAML::Key << "command" << YAML::Value << YAML::Flow << YAML::BeginSeq << "/bin/bash"
        << "-c" << YAML::EndSeq;
    out << YAML::Key << "args" << YAML::Value << YAML::BeginSeq << YAML::Literal
        << index_script(group) << YAML::EndSeq;
    if (gpus > 0) {
      out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap << YAML::Key << "limits"
          << YAML::Value << YAML::BeginMap << YAML::Key << "nvidia.com/gpu" << YAML::Value << gpus
          << YAML::EndMap << YAML::EndMap;
    }
    out << YAML::Key << "volumeMounts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap
        << YAML::Key << "name" << YAML::Value << "results" << YAML::Key << "mountPath"
        << YAML::Value << options.mount_path << YAML::EndMap << YAML::EndSeq;
    out << YAML::EndMap << YAML::EndSeq;  // the container, containers
    out << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
        << "name" << YAML::Value << "results" << YAML::Key << "persistentVolumeClaim" << YAML::Value
        << YAML::BeginMap << YAML::Key << "claimName" << YAML::Value << dns_label(options.pvc)
        << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
    out << YAML::EndMap << YAML::EndMap << YAML::EndMap << YAML::EndMap;  // pod spec .. document
  }
  if (!out.good()) return fail(ErrorKind::internal, std::string("yaml: ") + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace kvprof::scheduler
