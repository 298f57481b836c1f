// Slurm through its client tools (see slurm.hpp).
#include "kvprof/scheduler/slurm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "kvprof/scheduler/slurm_text.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/shell.hpp"

namespace kvprof::scheduler {

namespace {

using namespace std::chrono_literals;

bool plain(std::string_view v, std::string_view also) {
  return std::ranges::all_of(v, [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           also.find(c) != std::string_view::npos;
  });
}

// A path sbatch reads from a directive as it is: no blank, quote or %-pattern in it.
bool directive_safe_path(const std::filesystem::path& p) {
  return !p.empty() && plain(p.string(), "/._-+,=");
}

Expected<sys::CommandResult> slurm_tool(const std::vector<std::string>& argv) {
  sys::CommandOptions o;
  o.timeout = 60s;
  o.max_output_bytes = k_max_slurm_output_bytes;
  auto r = sys::run_command(argv, o);
  if (!r) {
    if (r.error().kind == ErrorKind::not_found) {
      return fail(ErrorKind::not_found,
                  fmt::format("{} was not found in PATH: run kvprof where Slurm's client tools "
                              "are (a login node), or install them (Debian: slurm-client)",
                              argv.front()));
    }
    return std::unexpected(r.error());
  }
  if (r->timed_out) {
    return fail(ErrorKind::io,
                fmt::format("{} did not answer in 60 s (is slurmctld up?)", argv.front()));
  }
  return r;
}

}  // namespace

Expected<std::unique_ptr<SlurmScheduler>> SlurmScheduler::open(SlurmOptions options) {
  const char* path = std::getenv("PATH");
  if (!sys::find_executable("sbatch", path != nullptr ? path : "/usr/bin:/bin")) {
    return fail(ErrorKind::not_found,
                "--executor slurm: sbatch was not found in PATH; run kvprof where Slurm's client "
                "tools are (a login node), or install them (Debian: slurm-client)");
  }
  if (!plain(options.partition, "_.-,")) {
    return fail(ErrorKind::usage, fmt::format("--partition '{}': not a partition name (letters, "
                                              "digits, _ . - and commas)",
                                              options.partition));
  }
  if (!plain(options.account, "_.-")) {
    return fail(ErrorKind::usage,
                fmt::format("--account '{}': not an account name", options.account));
  }
  if (!plain(options.time_limit, ":-")) {
    return fail(ErrorKind::usage,
                fmt::format("--time-limit '{}': not a Slurm time (\"30\", \"1:00:00\", \"1-0\")",
                            options.time_limit));
  }
  for (const auto& a : options.sbatch_args) {
    if (!a.starts_with("-") || a.find_first_of("\n\r") != std::string::npos || a.size() > 1000) {
      return fail(ErrorKind::usage,
                  fmt::format("--sbatch-arg '{}': give one sbatch option per flag, as sbatch "
                              "takes it (\"--qos=high\", \"--constraint=a100\")",
                              a.substr(0, 100)));
    }
  }
  return std::unique_ptr<SlurmScheduler>(new SlurmScheduler(std::move(options)));
}

Expected<std::string> SlurmScheduler::batch_script(const JobRequest& request) const {
  if (request.name.empty() || request.name.size() > 200 || !plain(request.name, "._-")) {
    return fail(ErrorKind::internal, fmt::format("job name '{}' is not plain", request.name));
  }
  if (request.command.empty()) return fail(ErrorKind::internal, "a job without a command");
  std::string comment = request.comment.substr(0, 200);
  std::ranges::replace_if(
      comment, [](char c) { return !plain(std::string_view(&c, 1), " ._:/-"); }, '_');
  std::string s = "#!/bin/bash\n";
  s += fmt::format("#SBATCH --job-name={}\n", request.name);
  if (!comment.empty()) s += fmt::format("#SBATCH --comment=\"{}\"\n", comment);
  s += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks={}\n", std::max(1u, request.nodes),
                   std::max(1u, request.nodes));
  if (request.gpus > 0) s += fmt::format("#SBATCH --gres=gpu:{}\n", request.gpus);
  if (!m_options.partition.empty())
    s += fmt::format("#SBATCH --partition={}\n", m_options.partition);
  if (!m_options.account.empty()) s += fmt::format("#SBATCH --account={}\n", m_options.account);
  if (!m_options.time_limit.empty()) s += fmt::format("#SBATCH --time={}\n", m_options.time_limit);
  // Slurm's own lines (an OOM kill, the time limit) go to the job's log where its path can be a
  // directive; the script's output is appended there in any case.
  s += "#SBATCH --open-mode=append\n";
  s += fmt::format("#SBATCH --output={}\n", directive_safe_path(request.log_path)
                                                ? request.log_path.string()
                                                : std::string("/dev/null"));
  for (const auto& a : m_options.sbatch_args)
    s += "#SBATCH " + a + "\n";
  s += "set -u\n";
  if (!request.log_path.empty())
    s += "exec >>" + shell_quote(request.log_path.string()) + " 2>&1\n";
  if (!request.work_dir.empty()) s += "cd " + shell_quote(request.work_dir.string()) + "\n";
  s += "echo \"kvprof job $SLURM_JOB_ID on $(hostname), GPUs: ${CUDA_VISIBLE_DEVICES:-none}\"\n";
  s += "exec";
  for (const auto& w : request.command)
    s += " " + shell_quote(w);
  s += "\n";
  return s;
}

Expected<std::string> SlurmScheduler::submit(const std::filesystem::path& script_path) {
  auto r = slurm_tool({"sbatch", "--parsable", script_path.string()});
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) {
    return fail(ErrorKind::io, fmt::format("sbatch refused the job: {}", r->first_line()));
  }
  // "<id>" or "<id>;<cluster>".
  std::string id = r->stdout_text.substr(0, r->stdout_text.find_first_of(";\n"));
  if (id.empty() || id.size() > 64 || !plain(id, "_")) {
    return fail(ErrorKind::io, fmt::format("sbatch answered '{}', not a job id", id.substr(0, 64)));
  }
  return id;
}

Expected<std::vector<JobStatus>> SlurmScheduler::list(std::string_view name_prefix) {
  auto r = slurm_tool({"squeue", "--me", "-h", "-o", "%i|%j|%T|%N|%r"});
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) return fail(ErrorKind::io, "squeue: " + r->first_line());
  auto jobs = parse_squeue_jobs(r->stdout_text);
  if (!jobs) return jobs;
  std::erase_if(*jobs, [&](const JobStatus& j) { return !j.name.starts_with(name_prefix); });
  return jobs;
}

Expected<JobStatus> SlurmScheduler::status(const std::string& id) {
  auto r = slurm_tool({"scontrol", "show", "job", "-o", id});
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) {
    const std::string said = r->first_line();
    if (said.find("Invalid job id") != std::string::npos)
      return fail(ErrorKind::not_found, fmt::format("Slurm no longer knows job {}", id));
    return fail(ErrorKind::io, "scontrol: " + said);
  }
  auto jobs = parse_scontrol_jobs(r->stdout_text);
  if (!jobs) return std::unexpected(jobs.error());
  for (auto& j : *jobs) {
    if (j.id == id) return std::move(j);
  }
  return fail(ErrorKind::not_found, fmt::format("Slurm no longer knows job {}", id));
}

Expected<void> SlurmScheduler::cancel(const std::vector<std::string>& ids) {
  if (ids.empty()) return {};
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  auto r = slurm_tool(argv);
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) return fail(ErrorKind::io, "scancel: " + r->first_line());
  return {};
}

}  // namespace kvprof::scheduler
