// The startup timeline of a launched server: the phases its log marks (weight loading, profile
// run, KV cache allocation, CUDA graph capture), each with the time its line was read, from the
// lines the enginelog parsers recognise; and the engine's own figures, parsed as the log streams.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/profile/timeline.hpp"

namespace kvprof::profile {

// GPU memory counts as released when it comes back to within this of the figure at launch.
inline constexpr uint64_t k_memory_released_slack_bytes = 256ULL << 20;

enum class StartupPhase { weight_loading, profile_run, kv_allocation, cuda_graph_capture };

// "weight_loading", "profile_run", "kv_allocation", "cuda_graph_capture".
std::string_view startup_phase_name(StartupPhase phase);

// One phase as the log showed it: begun at `begin_ns` (a line announcing it, else the end of the
// phase before or the launch) and ended at `end_ns`, the last line that reported its figures
// before the server was ready.
struct StartupMark {
  StartupPhase phase = StartupPhase::weight_loading;
  std::optional<int64_t> begin_ns;  // a line announced the start
  int64_t end_ns = 0;
  uint64_t line_no = 0;
  std::string line;  // the line that ended it (at most 400 characters)
};

// Collects marks and the engine-log report from the server's lines; thread-safe.
class StartupWatcher {
 public:
  // Reads one line: feeds the parser, marks a phase when the line gave one of its figures.
  void on_line(const LogLine& line);
  // Lines after this point no longer move phase ends (they are the serving log).
  void set_ready(int64_t t_ns);

  // The phases seen, in the order they ended.
  [[nodiscard]] std::vector<StartupMark> marks() const;
  // Whether the lines so far say the slots share one KV cache (llama.cpp's "kv_unified = true").
  [[nodiscard]] bool kv_unified() const;
  // The figures parsed from every line so far; the watcher is spent afterwards.
  enginelog::EngineLogReport finish();

 private:
  mutable std::mutex m_mutex;
  enginelog::EngineLogParser m_parser{engines::log_parse_options()};
  std::vector<StartupMark> m_marks;
  std::vector<std::pair<StartupPhase, int64_t>> m_begins;
  std::optional<int64_t> m_ready_ns;
};

// What the run knows about its launched server, for summary.json.
struct LaunchReport {
  std::string command;  // with the placeholders filled
  pid_t pid = 0;
  uint16_t port = 0;
  int64_t launched_ns = 0;
  std::optional<double> ready_s;  // from launch to the first healthy answer
  std::vector<StartupMark> marks;
  StopOutcome stop;
  std::optional<uint64_t> used_before_launch_bytes;  // GPU used (all sampled GPUs) at launch
  std::optional<uint64_t> used_after_stop_bytes;     // ... once the server stopped
  std::optional<bool> memory_released;  // used came back to within 256 MiB of the launch figure
};

// The summed GPU used bytes at `t_ns`: each GPU's first sample at or after it (a log line comes
// after the allocation it reports), else its last one before.
std::optional<uint64_t> used_at(const std::vector<MemoryPoint>& memory, int64_t t_ns);

// summary.json's "engine_reported" object: the engine log parse (report::text::engine_log_json,
// with `source`) and "components": the first device's weights, KV cache, activation peak, non-torch
// and CUDA graph figures, each with confidence "reported by engine".
nlohmann::json engine_reported_json(const enginelog::EngineLogReport& log,
                                    const std::string& source);

// summary.json's "launch" object: the command, readiness, each phase with its seconds from
// launch and GPU memory at its end, and how the server stopped.
nlohmann::json launch_json(const LaunchReport& launch, const std::vector<MemoryPoint>& memory);

}  // namespace kvprof::profile
