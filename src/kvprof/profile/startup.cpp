// The startup timeline of a launched server (see startup.hpp).
#include "kvprof/profile/startup.hpp"

#include <algorithm>
#include <map>

#include "kvprof/report/text/engine_log_report.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::profile {

namespace {

using nlohmann::json;

constexpr size_t k_max_line_chars = 400;

std::optional<StartupPhase> phase_of(enginelog::Component c) {
  switch (c) {
    case enginelog::Component::weights:
      return StartupPhase::weight_loading;
    case enginelog::Component::activation_peak:
    case enginelog::Component::non_torch:
    case enginelog::Component::non_kv_total:
      return StartupPhase::profile_run;
    case enginelog::Component::kv_cache:
    case enginelog::Component::kv_cache_k:
    case enginelog::Component::kv_cache_v:
      return StartupPhase::kv_allocation;
    case enginelog::Component::cuda_graph:
      return StartupPhase::cuda_graph_capture;
    default:
      return std::nullopt;  // llama.cpp's compute and output buffers are no startup phase
  }
}

// Lines that announce a phase (vLLM, SGLang, llama.cpp wording).
std::optional<StartupPhase> begun_by(std::string_view text) {
  const auto has = [&](std::string_view s) { return text.find(s) != std::string_view::npos; };
  if (has("Starting to load model") || has("Load weight begin") ||
      has("llama_model_loader: loaded meta data")) {
    return StartupPhase::weight_loading;
  }
  if (has("Capturing CUDA graph") || has("Capture cuda graph begin") ||
      has("Capture CUDA graph begin")) {
    return StartupPhase::cuda_graph_capture;
  }
  return std::nullopt;
}

}  // namespace

std::string_view startup_phase_name(StartupPhase phase) {
  switch (phase) {
    case StartupPhase::weight_loading:
      return "weight_loading";
    case StartupPhase::profile_run:
      return "profile_run";
    case StartupPhase::kv_allocation:
      return "kv_allocation";
    case StartupPhase::cuda_graph_capture:
      return "cuda_graph_capture";
  }
  return "weight_loading";
}

void StartupWatcher::on_line(const LogLine& line) {
  std::lock_guard lock(m_mutex);
  const auto& r = m_parser.report();
  const size_t n_figures = r.figures.size();
  const bool had_kv_setting =
      r.settings.num_gpu_blocks || r.settings.kv_cache_tokens || r.settings.max_total_num_tokens;
  m_parser.feed(line.text);
  m_parser.feed("\n");
  if (m_ready_ns) return;
  std::vector<StartupPhase> ended;
  for (size_t i = n_figures; i < r.figures.size(); ++i) {
    if (auto p = phase_of(r.figures[i].component)) ended.push_back(*p);
  }
  if (!had_kv_setting && (r.settings.num_gpu_blocks || r.settings.kv_cache_tokens ||
                          r.settings.max_total_num_tokens)) {
    ended.push_back(StartupPhase::kv_allocation);
  }
  if (auto p = begun_by(line.text)) m_begins.emplace_back(*p, line.t_mono_ns);
  for (StartupPhase p : ended) {
    auto it = std::find_if(m_marks.begin(), m_marks.end(),
                           [&](const StartupMark& m) { return m.phase == p; });
    if (it == m_marks.end()) {
      StartupMark m;
      m.phase = p;
      for (const auto& [bp, t] : m_begins) {
        if (bp == p) m.begin_ns = t;
      }
      it = m_marks.insert(m_marks.end(), m);
    }
    it->end_ns = line.t_mono_ns;  // the last rank to report ends the phase
    it->line_no = line.line_no;
    it->line = utf8_prefix(line.text, k_max_line_chars);
  }
}

void StartupWatcher::set_ready(int64_t t_ns) {
  std::lock_guard lock(m_mutex);
  m_ready_ns = t_ns;
}

std::vector<StartupMark> StartupWatcher::marks() const {
  std::lock_guard lock(m_mutex);
  auto marks = m_marks;
  std::stable_sort(marks.begin(), marks.end(),
                   [](const StartupMark& a, const StartupMark& b) { return a.end_ns < b.end_ns; });
  return marks;
}

bool StartupWatcher::kv_unified() const {
  std::lock_guard lock(m_mutex);
  const auto& v = m_parser.report().settings.kv_unified;
  return v && v->value == "true";
}

enginelog::EngineLogReport StartupWatcher::finish() {
  std::lock_guard lock(m_mutex);
  return m_parser.finish();
}

std::optional<uint64_t> used_at(const std::vector<MemoryPoint>& memory, int64_t t_ns) {
  std::map<unsigned, uint64_t> before, after;
  for (const auto& p : memory) {
    if (p.t_mono_ns < t_ns) {
      before[p.gpu] = p.used_bytes;
    } else if (!after.contains(p.gpu)) {
      after[p.gpu] = p.used_bytes;
    }
  }
  for (const auto& [gpu, used] : before)
    after.try_emplace(gpu, used);
  if (after.empty()) return std::nullopt;
  uint64_t sum = 0;
  for (const auto& [gpu, used] : after)
    sum += used;
  return sum;
}

json launch_json(const LaunchReport& l, const std::vector<MemoryPoint>& memory) {
  const auto seconds = [&](int64_t t) { return static_cast<double>(t - l.launched_ns) / 1e9; };
  const auto opt = [](const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); };
  json phases = json::array();
  int64_t previous_end = l.launched_ns;
  for (const auto& m : l.marks) {
    const int64_t begin = m.begin_ns.value_or(previous_end);
    const auto used = used_at(memory, m.end_ns);
    phases.push_back({{"phase", startup_phase_name(m.phase)},
                      {"begin_s", seconds(begin)},
                      {"end_s", seconds(m.end_ns)},
                      {"duration_s", seconds(m.end_ns) - seconds(begin)},
                      {"begin_marked_by_log", m.begin_ns.has_value()},
                      {"gpu_used_bytes_at_end", opt(used)},
                      {"gpu_used_gib_at_end", used ? json(bytes_to_gib(*used)) : json(nullptr)},
                      {"line_no", m.line_no},
                      {"line", m.line}});
    previous_end = m.end_ns;
  }
  const auto& s = l.stop;
  return {{"command", redact_secrets(l.command)},
          {"pid", l.pid},
          {"port", l.port},
          {"log", "server.log"},
          {"ready_s", l.ready_s ? json(*l.ready_s) : json(nullptr)},
          {"launched_mono_ns", l.launched_ns},  // begin_s/end_s count from here
          {"phases", phases},
          {"stop",
           {{"was_running", s.was_running},
            {"killed_after_grace", s.killed},
            {"exit_code", s.exit_code ? json(*s.exit_code) : json(nullptr)},
            {"term_signal", s.term_signal ? json(*s.term_signal) : json(nullptr)},
            {"stop_s", s.stop_s},
            {"process_group_gone", s.group_gone}}},
          {"gpu_used_before_launch_bytes", opt(l.used_before_launch_bytes)},
          {"gpu_used_after_stop_bytes", opt(l.used_after_stop_bytes)},
          {"memory_released", l.memory_released ? json(*l.memory_released) : json(nullptr)},
          {"memory_released_slack_bytes", k_memory_released_slack_bytes}};
}

json engine_reported_json(const enginelog::EngineLogReport& log, const std::string& source) {
  json j = report::text::engine_log_json(log);
  j["source"] = source;
  json components = json::object();
  for (const auto& f : log.figures) {
    if (f.superseded) continue;
    const std::string name(enginelog::component_name(f.component));
    if (components.contains(name)) {
      // The first device's figure, or the sum of a device's buffers (llama.cpp per buffer type).
      if (components[name]["device"] != f.device) continue;
      const uint64_t bytes = components[name]["bytes"].get<uint64_t>() + f.size.bytes;
      components[name]["bytes"] = bytes;
      components[name]["gib"] = bytes_to_gib(bytes);
      continue;
    }
    components[name] = {{"bytes", f.size.bytes},
                        {"gib", bytes_to_gib(f.size.bytes)},
                        {"device", f.device},
                        {"confidence", "reported by engine"},
                        {"line", f.source.line_no}};
  }
  j["components"] = components;
  return j;
}

}  // namespace kvprof::profile
