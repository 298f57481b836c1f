// A sweep's configuration as a batch job (see sweep_job.hpp).
#include "kvprof/experiment/sweep_job.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "kvprof/experiment/node_sampling.hpp"
#include "kvprof/results/run_folder.hpp"
#include "kvprof/scheduler/job_environment.hpp"
#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int k_result_schema = 1;
// How often the samplers on the other nodes of a multi-node job read their GPUs.
constexpr uint32_t k_node_interval_ms = 100;

// The node this job runs on: Kubernetes' downward API says it (KVPROF_NODE_NAME, set by the Job
// kvprof submits), else the host name (a Slurm node's).
std::string host_name() {
  if (const char* node = std::getenv("KVPROF_NODE_NAME"); node != nullptr && *node != '\0')
    return std::string(node).substr(0, 253);
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

Expected<void> write_job_result(const fs::path& path, const JobResult& r) {
  const json j = {{"schema_version", k_result_schema},
                  {"fingerprint", r.fingerprint},
                  {"job_id", r.job_id},
                  {"node", r.node},
                  {"status", r.status},
                  {"reason", r.reason},
                  {"run_dir", r.run_dir},
                  {"started_unix_s", r.started_unix_s},
                  {"ended_unix_s", r.ended_unix_s}};
  return write_file_atomically(path, json_text(j, 2) + "\n");
}

}  // namespace

std::string job_name(const std::string& sweep, const std::string& fingerprint) {
  return "kvprof." + sweep + "." + fingerprint;
}

fs::path job_file(const fs::path& sweep_dir, const std::string& fingerprint, const char* suffix) {
  return sweep_dir / "jobs" / (fingerprint + suffix);
}

scheduler::JobRequest job_request(const SweepConfig& config, const PlannedConfig& pc,
                                  const SweepOptions& options, const ClusterOptions& cluster) {
  const std::string& name = config.settings.name;
  const fs::path dir = fs::absolute(sweep_dir(options.output_dir, name));
  scheduler::JobRequest r;
  r.name = job_name(name, pc.fingerprint);
  r.comment = fmt::format("kvprof sweep {} configuration {}", name, pc.id);
  // TP x PP GPUs; more than a node holds spread over the fewest nodes (pipeline stages on
  // several nodes), the same count on each.
  const uint32_t gpus =
      pc.gpu == "cpu"
          ? 0
          : std::max<uint32_t>(1, pc.entry.tensor_parallel_size * pc.entry.pipeline_parallel_size);
  const uint32_t per_node = std::max(1u, cluster.gpus_per_node);
  r.nodes = std::max<uint32_t>(1, (gpus + per_node - 1) / per_node);
  r.gpus = (gpus + r.nodes - 1) / r.nodes;
  r.log_path = job_file(dir, pc.fingerprint, ".log");
  r.work_dir = fs::absolute(options.output_dir).parent_path();
  r.command = {cluster.kvprof_path.string(),
               "sweep",
               "--config",
               cluster.config_file.string(),
               "--output-dir",
               fs::absolute(options.output_dir).string(),
               "--name",
               name,
               "--job",
               pc.fingerprint,
               "--no-report"};
  if (options.run_unfit) r.command.push_back("--run-unfit");
  r.shared_paths = {cluster.config_file, fs::absolute(options.output_dir)};
  return r;
}

Expected<JobResult> read_job_result(const fs::path& path) {
  auto j = results::read_json_file(path);
  if (!j) return std::unexpected(j.error());
  const auto text = [&](const char* key) {
    const auto it = j->find(key);
    return it != j->end() && it->is_string() ? it->get<std::string>().substr(0, 4096)
                                             : std::string();
  };
  const auto number = [&](const char* key) {
    const auto it = j->find(key);
    return it != j->end() && it->is_number() ? it->get<double>() : 0.0;
  };
  const auto schema = j->find("schema_version");
  if (schema == j->end() || !schema->is_number_integer() || schema->get<int>() != k_result_schema ||
      text("fingerprint").empty()) {
    return fail(ErrorKind::input, fmt::format("{}: not a kvprof job result (schema_version {})",
                                              path.string(), k_result_schema));
  }
  return JobResult{text("fingerprint"),      text("job_id"),        text("node"),
                   text("status"),           text("reason"),        text("run_dir"),
                   number("started_unix_s"), number("ended_unix_s")};
}

Expected<JobResult> run_sweep_job(const SweepConfig& config, const Plan& plan,
                                  const SweepOptions& options, const SweepDeps& deps,
                                  const std::string& fingerprint) {
  const auto pc = std::ranges::find_if(
      plan.configs, [&](const PlannedConfig& c) { return c.fingerprint == fingerprint; });
  if (pc == plan.configs.end()) {
    return fail(ErrorKind::not_found,
                fmt::format("--job {}: the sweep file has no such configuration now (was it "
                            "changed after the jobs were submitted?)",
                            fingerprint));
  }
  const fs::path dir = sweep_dir(options.output_dir, config.settings.name);
  // The state as the submitting kvprof saved it: the conditions an earlier run finished.
  auto state = load_state(dir);
  if (!state) return std::unexpected(state.error());
  ConfigRecord rec;
  if (const auto it = state->records.find(fingerprint); it != state->records.end())
    rec = it->second;
  SweepOptions job_options = options;
  job_options.record_runs = false;
  const auto job = scheduler::current_job();
  if (job && !job->gpus.empty()) job_options.gpus = job->gpus;
  JobResult result;
  result.fingerprint = fingerprint;
  result.job_id = job ? job->job_id : "";
  // The scheduler's name for the node (a Slurm node's need not be its host name).
  result.node = job && !job->node.empty() ? job->node : host_name();
  result.started_unix_s = unix_now_s();
  const std::string run_before = rec.run_id;
  // A job of several nodes: each node's GPUs sampled beside the run (pipeline stages there).
  const fs::path nodes_dir = job_file(dir, fingerprint, ".nodes");
  std::unique_ptr<NodeSamplers> samplers;
  if (job && job->nodes > 1) {
    std::error_code ec;
    fs::remove_all(nodes_dir, ec);
    auto started = NodeSamplers::start(*job, fs::read_symlink("/proc/self/exe", ec), nodes_dir,
                                       k_node_interval_ms);
    if (started) {
      samplers = std::move(*started);
      deps.say(fmt::format("sampling the GPUs of all {} nodes of job {} into {}", job->nodes,
                           job->job_id, nodes_dir.string()));
    } else {
      deps.say("warning: the other nodes are not sampled: " + started.error().message);
    }
  }
  run_configuration(config, *pc, job_options, deps, rec);
  if (samplers) samplers->stop();
  result.ended_unix_s = unix_now_s();
  result.status = rec.status;
  result.reason = rec.reason;
  // The run made now, if one was (a failed launch makes none).
  if (rec.run_id != run_before && !rec.run_dir.empty())
    result.run_dir = fs::absolute(rec.run_dir).string();
  if (samplers && !result.run_dir.empty()) {
    auto nodes = read_node_traces(nodes_dir);
    if (nodes && nodes->empty()) {
      nodes = fail(ErrorKind::io, fmt::format("no node's sampler wrote a trace (its output: {})",
                                              (nodes_dir / "samplers.log").string()));
    }
    auto attached = nodes ? attach_node_memory(result.run_dir, nodes_dir, *nodes)
                          : Expected<void>(std::unexpected(nodes.error()));
    if (!attached) {
      deps.say("warning: the nodes' GPU traces are not in the run folder: " +
               attached.error().message);
    } else {
      deps.say(fmt::format("{} nodes' GPU traces are in {}/nodes", nodes->size(), result.run_dir));
    }
  }
  if (auto w = write_job_result(job_file(dir, fingerprint, ".result.json"), result); !w)
    return std::unexpected(w.error());
  return result;
}

}  // namespace kvprof::experiment
