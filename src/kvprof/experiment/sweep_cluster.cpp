// A sweep as cluster jobs (see sweep_cluster.hpp).
#include "kvprof/experiment/sweep_cluster.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "kvprof/experiment/sweep_summary.hpp"
#include "kvprof/results/history_entries.hpp"
#include "kvprof/results/run_folder.hpp"
#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The run folder the job of configuration `run_tag` was writing when it died (a folder of the
// configuration's, made since the job started, without its summary.json); none when it made none.
std::optional<fs::path> unfinished_run_folder(const fs::path& output_dir,
                                              const std::string& run_tag, double since_unix_s) {
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(output_dir, ec)) {
    const fs::path& p = d.path();
    struct stat st {};
    if (!d.is_directory(ec) || !p.filename().string().ends_with("_" + run_tag) ||
        fs::exists(p / "summary.json", ec) || ::stat(p.c_str(), &st) != 0 ||
        static_cast<double>(st.st_mtime) < since_unix_s - 2) {
      continue;
    }
    return p;
  }
  return std::nullopt;
}

// A tracked job: the configuration it runs and what was last said of it.
struct Tracked {
  const PlannedConfig* pc = nullptr;
  std::string head;  // "[i/n] label"
  std::string job_id;
  scheduler::JobPhase phase = scheduler::JobPhase::pending;
  std::string said;  // the last progress line's state, so that a line is printed on a change
};

// The sweep on the cluster: its state, the jobs followed, and how each ended.
class ClusterSweep {
 public:
  ClusterSweep(const SweepConfig& config, const Plan& plan, const SweepOptions& options,
               const ClusterOptions& cluster, scheduler::JobScheduler& scheduler,
               const SweepDeps& deps, SweepState& state, SweepOutcome& out)
      : m_config(config),
        m_plan(plan),
        m_options(options),
        m_cluster(cluster),
        m_scheduler(scheduler),
        m_deps(deps),
        m_state(state),
        m_out(out) {}

  // Submits (or finds again, or collects) every configuration not finished.
  Expected<void> submit_all();
  // Follows the jobs until each ended or the sweep is stopped (then `cancel` decides).
  Expected<void> follow(const ClusterDeps& cluster_deps);

 private:
  // The state, the conditions files of the configurations whose runs were taken since the last
  // save (only those: a big sweep is not rewritten whole at every job), and the sweep's files.
  Expected<void> save() {
    if (m_changed.empty()) m_changed.insert(k_no_configuration);
    for (const auto& fp : m_changed) {
      if (auto r = save_state(m_out.dir, m_state, &fp); !r) return r;
    }
    m_changed.clear();
    return write_sweep_files(m_out.dir, m_plan, m_state, m_options.config_file, "running");
  }
  std::string name() const { return m_config.settings.name; }
  void collect(const Tracked& t, const std::optional<scheduler::JobStatus>& status);
  void count(const PlannedConfig& pc, const ConfigRecord& rec, const std::string& head);

  const SweepConfig& m_config;
  const Plan& m_plan;
  const SweepOptions& m_options;
  const ClusterOptions& m_cluster;
  scheduler::JobScheduler& m_scheduler;
  const SweepDeps& m_deps;
  SweepState& m_state;
  SweepOutcome& m_out;
  std::vector<Tracked> m_tracked;
  std::set<std::string> m_changed;  // fingerprints whose conditions changed since the last save
};

void ClusterSweep::count(const PlannedConfig& pc, const ConfigRecord& rec,
                         const std::string& head) {
  ++m_out.n_ran;
  if (rec.status == "done") ++m_out.n_done;
  if (rec.status == "partial") ++m_out.n_partial;
  if (rec.status == "failed" || rec.status == "interrupted") {
    ++m_out.n_failed;
    m_out.failures.push_back(fmt::format("{}: {}", pc.id, rec.reason));
  }
  const auto& peak = rec.figures.peak_used_bytes;
  m_deps.say(fmt::format("{}: {} in {} on {} (job {}){}{}", head, rec.status,
                         format_duration(rec.duration_s), rec.node.empty() ? "?" : rec.node,
                         rec.job_id, rec.run_id.empty() ? "" : ", run " + rec.run_id,
                         peak ? fmt::format(", peak {:.2f} GiB", bytes_to_gib(*peak))
                              : (rec.reason.empty() ? "" : ": " + rec.reason)));
}

// Takes what the job of `t` left: its result and run folder, or, when it wrote none, how the
// scheduler says it ended (killed for memory, out of time, its node lost, preempted, cancelled).
void ClusterSweep::collect(const Tracked& t, const std::optional<scheduler::JobStatus>& status) {
  ConfigRecord& rec = m_state.records[t.pc->fingerprint];
  const fs::path log = job_file(m_out.dir, t.pc->fingerprint, ".log");
  auto result = read_job_result(job_file(m_out.dir, t.pc->fingerprint, ".result.json"));
  const std::string ended =
      status ? fmt::format("{}{}", status->state,
                           status->reason.empty() ? "" : " (" + status->reason + ")")
             : std::string("unknown (the scheduler no longer lists it)");
  if (status && !status->node.empty()) rec.node = status->node;
  m_changed.insert(t.pc->fingerprint);
  if (result && result->job_id == rec.job_id) {
    rec.status = result->status.empty() ? "failed" : result->status;
    rec.reason = result->reason;
    // The scheduler stopped it (cancelled, out of time, preempted): the run inside saw only a
    // signal, the scheduler says why.
    if (status && !status->ended_by_itself() && status->state != "COMPLETED") {
      if (rec.status == "done") rec.status = "partial";
      rec.reason = fmt::format("{} job {} ended {}{}", m_scheduler.name(), rec.job_id, ended,
                               rec.reason.empty() ? "" : ": " + rec.reason);
    }
    // The scheduler names the node; the job's own host name is the fallback (a pod's is its own).
    if (!result->node.empty() && (!status || status->node.empty())) rec.node = result->node;
    rec.started_unix_s = result->started_unix_s;
    rec.ended_unix_s = result->ended_unix_s;
    if (!result->run_dir.empty()) {
      // As in a run here: a configuration that starts afresh keeps nothing of earlier runs.
      if (rec.completed_conditions().empty()) {
        rec.runs.clear();
        rec.conditions.clear();
        rec.figures = {};
      }
      if (auto run = results::open_run_folder(result->run_dir)) {
        take_run(run->summary, {fs::path(result->run_dir).filename().string(), result->run_dir},
                 rec);
        results::record_or_warn(m_options.output_dir, results::history_entry(run->summary, name()));
      } else {
        rec.status = "failed";
        rec.reason = fmt::format("job {} ended but its run folder cannot be read: {}", rec.job_id,
                                 run.error().message);
      }
    }
  } else {
    rec.status = "failed";
    rec.reason = fmt::format("{} job {} ended {} before kvprof wrote its result; its log: {}",
                             m_scheduler.name(), rec.job_id, ended, log.string());
    rec.ended_unix_s = unix_now_s();
    // The run it was making (killed with its node, for memory): the folder says what happened.
    if (const auto dir =
            unfinished_run_folder(m_options.output_dir, t.pc->id, rec.started_unix_s)) {
      json note = {{"job_id", rec.job_id},
                   {"scheduler", m_scheduler.name()},
                   {"state", status ? status->state : std::string("unknown")},
                   {"reason", status ? status->reason : std::string()},
                   {"node", rec.node},
                   {"job_log", log.string()},
                   {"said",
                    "the job ended before kvprof wrote summary.json: what is here "
                    "is what the run had written until then"}};
      // A job of several nodes: what the sampler of each node had recorded.
      std::error_code ec;
      if (const fs::path nodes = job_file(m_out.dir, t.pc->fingerprint, ".nodes");
          fs::is_directory(nodes, ec))
        note["node_traces"] = nodes.string();
      (void)write_file_atomically(*dir / "job_ended.json", json_text(note, 2) + "\n");
      rec.reason += "; its unfinished run folder: " + dir->string();
    }
  }
  rec.duration_s = std::max(0.0, rec.ended_unix_s - rec.started_unix_s);
  count(*t.pc, rec, t.head);
}

Expected<void> ClusterSweep::submit_all() {
  auto listed = m_scheduler.list(job_name(name(), ""));
  if (!listed) return std::unexpected(listed.error());
  std::map<std::string, scheduler::JobStatus> by_name;
  for (auto& j : *listed)
    by_name[j.name] = std::move(j);
  const size_t n = m_plan.configs.size();
  for (size_t i = 0; i < n; ++i) {
    const PlannedConfig& pc = m_plan.configs[i];
    ConfigRecord& rec = m_state.records[pc.fingerprint];
    Tracked t{&pc, fmt::format("[{}/{}] {}", i + 1, n, pc.label), "", {}, ""};
    if (take_configuration(pc, t.head, m_options, m_deps, m_state, m_out) != Take::run) continue;
    // Its job from an earlier run of the sweep, still queued or running: followed again.
    if (const auto it = by_name.find(job_name(name(), pc.fingerprint)); it != by_name.end()) {
      rec.job_id = t.job_id = it->second.id;
      m_deps.say(fmt::format("{}: its {} job {} from before is {}; following it", t.head,
                             m_scheduler.name(), rec.job_id, it->second.state));
      m_tracked.push_back(std::move(t));
      continue;
    }
    // Its job ended while no kvprof followed it: its result is collected.
    if (!rec.job_id.empty() && (rec.status == "queued" || rec.status == "running")) {
      t.job_id = rec.job_id;
      auto status = m_scheduler.status(rec.job_id);
      collect(t, status ? std::optional(*status) : std::nullopt);
      if (rec.finished()) continue;
    }
    if (m_deps.should_stop && m_deps.should_stop()) {
      m_out.interrupted = true;
      break;
    }
    const auto request = job_request(m_config, pc, m_options, m_cluster);
    auto script = m_scheduler.batch_script(request);
    const fs::path script_path =
        job_file(m_out.dir, pc.fingerprint, m_scheduler.script_suffix().c_str());
    std::error_code ec;
    fs::remove(job_file(m_out.dir, pc.fingerprint, ".result.json"), ec);
    Expected<std::string> id =
        script ? Expected<std::string>(std::string()) : std::unexpected(script.error());
    if (id) {
      if (auto w = write_file_atomically(script_path, *script); !w)
        return std::unexpected(w.error());
      id = m_scheduler.submit(script_path);
    }
    rec.attempts += 1;
    rec.started_unix_s = unix_now_s();
    if (!id) {
      rec.status = "failed";
      rec.reason = id.error().message;
      rec.ended_unix_s = rec.started_unix_s;
      rec.duration_s = 0;
      count(pc, rec, t.head);
      continue;
    }
    rec.job_id = t.job_id = *id;
    rec.status = "queued";
    rec.reason.clear();
    rec.node.clear();
    m_deps.say(fmt::format("{}: submitted as {} job {} ({} GPU{}, expected {})", t.head,
                           m_scheduler.name(), *id, request.gpus, request.gpus == 1 ? "" : "s",
                           format_duration(pc.expected_s)));
    m_tracked.push_back(std::move(t));
  }
  return save();
}

Expected<void> ClusterSweep::follow(const ClusterDeps& cluster_deps) {
  const auto stopped = [&] { return m_deps.should_stop && m_deps.should_stop(); };
  while (!m_tracked.empty() && !stopped()) {
    auto listed = m_scheduler.list(job_name(name(), ""));
    if (!listed) {
      m_deps.say(fmt::format("{} did not answer ({}); asking again", m_scheduler.name(),
                             listed.error().message));
    } else {
      std::map<std::string, const scheduler::JobStatus*> by_id;
      for (const auto& j : *listed)
        by_id[j.id] = &j;
      bool changed = false;
      for (auto it = m_tracked.begin(); it != m_tracked.end();) {
        ConfigRecord& rec = m_state.records[it->pc->fingerprint];
        const auto found = by_id.find(it->job_id);
        if (found == by_id.end() || found->second->phase == scheduler::JobPhase::ended) {
          auto status = m_scheduler.status(it->job_id);
          collect(*it, status ? std::optional(*status) : std::nullopt);
          it = m_tracked.erase(it);
          changed = true;
          continue;
        }
        const auto& j = *found->second;
        const bool running = j.phase == scheduler::JobPhase::running;
        const std::string now = running ? "running on " + j.node : "pending";
        if (now != it->said) {
          rec.status = running ? "running" : "queued";
          rec.node = j.node;
          m_deps.say(fmt::format("{}: {} job {} {}{}", it->head, m_scheduler.name(), j.id, now,
                                 !running && !j.reason.empty() ? " (" + j.reason + ")" : ""));
          it->said = now;
          changed = true;
        }
        ++it;
      }
      if (changed) {
        if (auto r = save(); !r) return r;
      }
    }
    if (m_deps.on_run_status && !m_tracked.empty()) {
      size_t running = 0;
      for (const auto& t : m_tracked)
        running += m_state.records[t.pc->fingerprint].status == "running" ? 1 : 0;
      m_deps.on_run_status(fmt::format("{} job{} running, {} queued", running,
                                       running == 1 ? "" : "s", m_tracked.size() - running));
    }
    for (auto waited = std::chrono::milliseconds(0); waited < m_cluster.poll_interval && !stopped();
         waited += std::chrono::milliseconds(100))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (m_tracked.empty()) return {};
  m_out.interrupted = true;
  const bool cancel =
      cluster_deps.cancel_on_interrupt && cluster_deps.cancel_on_interrupt(m_tracked.size());
  std::vector<std::string> ids;
  for (const auto& t : m_tracked)
    ids.push_back(t.job_id);
  if (cancel) {
    if (auto r = m_scheduler.cancel(ids); !r) return std::unexpected(r.error());
    for (const auto& t : m_tracked) {
      ConfigRecord& rec = m_state.records[t.pc->fingerprint];
      rec.status = "interrupted";
      rec.reason = fmt::format("job {} cancelled when the sweep was stopped", t.job_id);
    }
    m_deps.say(fmt::format("cancelled {} job{}: {}", ids.size(), ids.size() == 1 ? "" : "s",
                           fmt::join(ids, " ")));
  } else {
    m_deps.say(
        fmt::format("left {} job{} queued or running ({}); run the same command again "
                    "to collect them",
                    ids.size(), ids.size() == 1 ? "" : "s", fmt::join(ids, " ")));
  }
  return {};
}

}  // namespace

Expected<SweepOutcome> run_sweep_on_cluster(const SweepConfig& config, const Plan& plan,
                                            const SweepOptions& options,
                                            const ClusterOptions& cluster,
                                            scheduler::JobScheduler& scheduler,
                                            const SweepDeps& deps,
                                            const ClusterDeps& cluster_deps) {
  auto open = open_sweep(config, options);
  if (!open) return std::unexpected(open.error());
  SweepOutcome out;
  out.dir = open->dir;
  SweepState& state = open->state;
  std::error_code ec;
  fs::create_directories(out.dir / "jobs", ec);
  if (ec) {
    return fail(ErrorKind::io,
                fmt::format("cannot create {}: {}", (out.dir / "jobs").string(), ec.message()));
  }
  ClusterSweep sweep(config, plan, options, cluster, scheduler, deps, state, out);
  if (auto r = sweep.submit_all(); !r) return std::unexpected(r.error());
  if (auto r = sweep.follow(cluster_deps); !r) return std::unexpected(r.error());
  // Each configuration's conditions were saved as it ended.
  if (auto r = close_sweep(plan, options, state, out, &k_no_configuration); !r)
    return std::unexpected(r.error());
  return out;
}

}  // namespace kvprof::experiment
