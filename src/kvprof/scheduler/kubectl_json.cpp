// kubectl's JSON about Jobs and pods (see kubectl_json.hpp).
#include "kvprof/scheduler/kubectl_json.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

namespace kvprof::scheduler {

namespace {

using nlohmann::json;

constexpr size_t k_max_kubectl_items = 100000;
constexpr size_t k_max_kubectl_field_chars = 256;

// `j[key]` as a string of at most k_max_kubectl_field_chars, "" when absent or not a string.
std::string text_at(const json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>().substr(0, k_max_kubectl_field_chars);
}

// `j[key]` as a small count, 0 when absent or not a number.
int64_t count_at(const json& j, const char* key) {
  if (!j.is_object()) return 0;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  const auto v = it->get<int64_t>();
  return v < 0 || v > 1'000'000 ? 0 : v;
}

const json& object_at(const json& j, const char* key) {
  static const json empty = json::object();
  if (!j.is_object()) return empty;
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

const json& array_at(const json& j, const char* key) {
  static const json empty = json::array();
  if (!j.is_object()) return empty;
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

Expected<json> parse_bounded(std::string_view text, const char* what) {
  if (text.size() > k_max_kubectl_output_bytes) {
    return fail(ErrorKind::input, fmt::format("kubectl printed over {} MiB for {}",
                                              k_max_kubectl_output_bytes >> 20, what));
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(ErrorKind::input, fmt::format("kubectl's {} is not a JSON object", what));
  return j;
}

// A Job's status from the Job alone: its conditions (Complete, Failed); PENDING otherwise, whether
// or not it has active pods (`has_active_pods`: only the pods say whether they run).
JobStatus job_status(const json& job, bool& has_active_pods) {
  JobStatus s;
  const json& meta = object_at(job, "metadata");
  s.id = text_at(meta, "name");
  s.name = text_at(object_at(meta, "annotations"), k_kvprof_name_annotation.data());
  if (s.name.empty()) s.name = s.id;
  const json& status = object_at(job, "status");
  s.phase = JobPhase::pending;
  s.state = "PENDING";
  size_t n = 0;
  for (const auto& c : array_at(status, "conditions")) {
    if (++n > 64) break;
    if (text_at(c, "status") != "True") continue;
    const std::string type = text_at(c, "type");
    if (type == "Complete") {
      s.phase = JobPhase::ended;
      s.state = "COMPLETED";
      s.reason = "None";
      return s;
    }
    if (type == "Failed") {
      s.phase = JobPhase::ended;
      s.reason = text_at(c, "reason");
      s.state = s.reason == "DeadlineExceeded" ? "TIMEOUT" : "FAILED";
      s.exit_code = 1;
      return s;
    }
  }
  has_active_pods = count_at(status, "active") > 0;
  return s;
}

}  // namespace

Expected<std::vector<JobStatus>> parse_kubectl_jobs(std::string_view json_text) {
  auto list = parse_bounded(json_text, "job list");
  if (!list) return std::unexpected(list.error());
  const auto it = list->find("items");
  if (it == list->end() || !it->is_array())
    return fail(ErrorKind::input, "kubectl's job list has no items");
  std::vector<JobStatus> jobs;
  for (const auto& item : *it) {
    if (jobs.size() >= k_max_kubectl_items) break;
    if (!item.is_object()) continue;
    bool active = false;
    JobStatus s = job_status(item, active);
    if (s.id.empty()) continue;
    if (active) {  // without its pods: running as far as the list tells
      s.phase = JobPhase::running;
      s.state = "RUNNING";
    }
    jobs.push_back(std::move(s));
  }
  return jobs;
}

Expected<JobStatus> parse_kubectl_job(std::string_view job_json, std::string_view pods_json) {
  auto job = parse_bounded(job_json, "job");
  if (!job) return std::unexpected(job.error());
  bool active = false;  // its pods below say whether they wait or run
  JobStatus s = job_status(*job, active);
  if (s.id.empty()) return fail(ErrorKind::input, "kubectl's job has no metadata.name");
  auto pods = parse_bounded(pods_json, "pod list");
  if (!pods) return std::unexpected(pods.error());
  // The newest pod tells (backoffLimit 0: there is one).
  size_t n = 0;
  for (const auto& pod : array_at(*pods, "items")) {
    if (++n > 64) break;
    const std::string node = text_at(object_at(pod, "spec"), "nodeName");
    if (!node.empty()) s.node = node;
    const json& pod_status = object_at(pod, "status");
    const std::string phase = text_at(pod_status, "phase");
    for (const auto& c : array_at(pod_status, "containerStatuses")) {
      const json& state = object_at(c, "state");
      const json& terminated = object_at(state, "terminated");
      if (!terminated.empty()) {
        s.exit_code = static_cast<int>(count_at(terminated, "exitCode"));
        const std::string reason = text_at(terminated, "reason");
        if (reason == "OOMKilled") {
          s.phase = JobPhase::ended;
          s.state = "OUT_OF_MEMORY";
        }
        if (!reason.empty() && s.state != "TIMEOUT") s.reason = reason;
      } else if (const std::string waiting = text_at(object_at(state, "waiting"), "reason");
                 !waiting.empty() && s.phase == JobPhase::pending) {
        s.reason = waiting;  // ContainerCreating, ImagePullBackOff, ...
      }
      break;  // kvprof's pods have one container
    }
    if (s.phase == JobPhase::pending && phase == "Running") {
      s.phase = JobPhase::running;
      s.state = "RUNNING";
    }
    if (s.phase == JobPhase::pending && phase == "Pending") {
      for (const auto& c : array_at(pod_status, "conditions")) {
        if (text_at(c, "type") == "PodScheduled" && text_at(c, "status") == "False") {
          s.reason = text_at(c, "reason");  // Unschedulable: no node has the GPUs
          break;
        }
      }
    }
  }
  return s;
}

}  // namespace kvprof::scheduler
