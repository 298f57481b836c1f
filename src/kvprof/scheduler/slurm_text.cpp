// Slurm's command output read back (see slurm_text.hpp).
#include "kvprof/scheduler/slurm_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <string>

#include "kvprof/util/utf8.hpp"

namespace kvprof::scheduler {

namespace {

constexpr size_t k_max_jobs = 100000;
constexpr size_t k_max_value_chars = 512;
constexpr size_t k_max_fields = 400;

std::string value_text(std::string_view v) {
  return to_valid_utf8(utf8_prefix(v, k_max_value_chars));
}

// "(null)" and "None" say nothing.
std::string said(std::string_view v) {
  return v == "(null)" || v == "None" ? std::string() : value_text(v);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty() && out.size() <= k_max_jobs) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

// "0:0" -> 0; "1:0" -> 1; "0:9" (killed by signal 9) -> 128 + 9.
int exit_code_of(std::string_view v) {
  const size_t colon = v.find(':');
  int code = 0, signal = 0;
  std::from_chars(v.data(), v.data() + std::min(colon, v.size()), code);
  if (colon != std::string_view::npos)
    std::from_chars(v.data() + colon + 1, v.data() + v.size(), signal);
  return signal > 0 ? 128 + signal : code;
}

// A line's Key=Value pairs; a word without '=' belongs to the value before it (values may hold
// blanks: a job name, a working directory).
std::map<std::string, std::string, std::less<>> fields_of(std::string_view line) {
  std::map<std::string, std::string, std::less<>> out;
  std::string* last = nullptr;
  size_t at = 0;
  while (at < line.size() && out.size() < k_max_fields) {
    const size_t end = std::min(line.find(' ', at), line.size());
    const std::string_view word = line.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      if (last != nullptr && last->size() < k_max_value_chars) *last += " " + value_text(word);
      continue;
    }
    last = &out[value_text(word.substr(0, eq))];
    *last = value_text(word.substr(eq + 1));
  }
  return out;
}

}  // namespace

JobPhase slurm_phase(std::string_view state) {
  // scontrol may add words ("CANCELLED by 0"): the first one is the state.
  state = state.substr(0, state.find(' '));
  for (std::string_view s : {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                             "RESV_DEL_HOLD", "SPECIAL_EXIT"}) {
    if (state == s) return JobPhase::pending;
  }
  for (std::string_view s :
       {"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED"}) {
    if (state == s) return JobPhase::running;
  }
  return JobPhase::ended;
}

bool JobStatus::ended_by_itself() const {
  return phase == JobPhase::ended && (state == "COMPLETED" || state == "FAILED");
}

Expected<std::vector<JobStatus>> parse_scontrol_jobs(std::string_view text) {
  if (text.size() > k_max_slurm_output_bytes) {
    return fail(ErrorKind::input,
                fmt::format("scontrol printed over {} MiB", k_max_slurm_output_bytes >> 20));
  }
  std::vector<JobStatus> out;
  for (const auto line : lines_of(text)) {
    if (line.starts_with("No jobs in the system")) continue;
    const auto f = fields_of(line);
    const auto id = f.find("JobId");
    const auto state = f.find("JobState");
    if (id == f.end() || state == f.end() || id->second.empty()) {
      return fail(ErrorKind::input,
                  fmt::format("scontrol printed a line without JobId and JobState: {}",
                              value_text(line.substr(0, 120))));
    }
    JobStatus j;
    j.id = id->second;
    j.state = state->second.substr(0, state->second.find(' '));
    j.phase = slurm_phase(j.state);
    if (const auto it = f.find("JobName"); it != f.end()) j.name = it->second;
    if (const auto it = f.find("Reason"); it != f.end()) j.reason = said(it->second);
    if (const auto it = f.find("NodeList"); it != f.end()) j.node = said(it->second);
    if (const auto it = f.find("ExitCode"); it != f.end()) j.exit_code = exit_code_of(it->second);
    out.push_back(std::move(j));
  }
  return out;
}

Expected<std::vector<JobStatus>> parse_squeue_jobs(std::string_view text) {
  if (text.size() > k_max_slurm_output_bytes) {
    return fail(ErrorKind::input,
                fmt::format("squeue printed over {} MiB", k_max_slurm_output_bytes >> 20));
  }
  std::vector<JobStatus> out;
  for (const auto line : lines_of(text)) {
    std::vector<std::string_view> cols;
    size_t at = 0;
    while (cols.size() < 5) {
      const size_t bar = line.find('|', at);
      // The reason comes last and may hold a '|' of its own.
      if (bar == std::string_view::npos || cols.size() == 4) {
        cols.push_back(line.substr(at));
        break;
      }
      cols.push_back(line.substr(at, bar - at));
      at = bar + 1;
    }
    if (cols.size() != 5 || cols[0].empty() || cols[2].empty()) {
      return fail(ErrorKind::input, fmt::format("squeue printed a line kvprof cannot read: {}",
                                                value_text(line.substr(0, 120))));
    }
    JobStatus j;
    j.id = value_text(cols[0]);
    j.name = value_text(cols[1]);
    j.state = value_text(cols[2]);
    j.phase = slurm_phase(j.state);
    j.node = said(cols[3]);
    j.reason = said(cols[4]);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace kvprof::scheduler
