// Where each configuration of a sweep stands (see sweep_status.hpp).
#include "kvprof/experiment/sweep_status.hpp"

#include <fmt/format.h>

#include <map>

#include "kvprof/experiment/sweep_job.hpp"
#include "kvprof/report/text/table.hpp"

namespace kvprof::experiment {

std::vector<ConfigStatus> sweep_status(const Plan& plan, const SweepState& state,
                                       const std::string& sweep_name,
                                       const std::vector<scheduler::JobStatus>& jobs) {
  std::map<std::string, const scheduler::JobStatus*> by_name;
  for (const auto& j : jobs)
    by_name[j.name] = &j;
  std::vector<ConfigStatus> out;
  for (const auto& pc : plan.configs) {
    ConfigStatus s;
    s.id = pc.id;
    s.label = pc.label;
    s.status = "not run";
    if (const auto it = state.records.find(pc.fingerprint); it != state.records.end()) {
      const ConfigRecord& r = it->second;
      if (!r.status.empty()) s.status = r.status;
      s.reason = r.reason;
      s.run_id = r.run_id;
    }
    if (const auto it = by_name.find(job_name(sweep_name, pc.fingerprint)); it != by_name.end()) {
      s.job = *it->second;
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// What a listed job is doing, in the table's words.
std::string job_text(const scheduler::JobStatus& j) {
  switch (j.phase) {
    case scheduler::JobPhase::pending:
      return fmt::format("queued (job {}{})", j.id, j.reason.empty() ? "" : ", " + j.reason);
    case scheduler::JobPhase::running:
      return fmt::format("running on {} (job {})", j.node.empty() ? "?" : j.node, j.id);
    case scheduler::JobPhase::ended:
      break;
  }
  return fmt::format("ended {} (job {})", j.state, j.id);
}

}  // namespace

std::string sweep_status_text(const std::vector<ConfigStatus>& statuses) {
  report::text::Table t({"#", "configuration", "status", "run", "why"});
  size_t i = 0;
  for (const auto& s : statuses) {
    ++i;
    t.add_row({std::to_string(i), s.label, s.job ? job_text(*s.job) : s.status,
               s.run_id.empty() ? "-" : s.run_id, s.reason.empty() ? "-" : s.reason});
  }
  return t.render();
}

nlohmann::json sweep_status_json(const std::vector<ConfigStatus>& statuses) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : statuses) {
    nlohmann::json job = nullptr;
    if (s.job) {
      job = {{"id", s.job->id},
             {"state", s.job->state},
             {"node", s.job->node},
             {"reason", s.job->reason}};
    }
    out.push_back({{"id", s.id},
                   {"label", s.label},
                   {"status", s.status},
                   {"reason", s.reason},
                   {"run_id", s.run_id},
                   {"job", std::move(job)}});
  }
  return out;
}

}  // namespace kvprof::experiment
