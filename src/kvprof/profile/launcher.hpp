// `profile --launch`: the server command, started by kvprof in its own process group, its output
// teed line by line to server.log (each line stamped on the run's clock and handed to a callback),
// waited on until it answers, and stopped at the end — SIGTERM to the group, SIGKILL after a
// grace period — so no process of it outlives the run.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::profile {

// Replaces each {name} in `command` with its value in `words` (one shell word each) or
// `word_lists` (several words, e.g. {engine_args}), quoted so that /bin/sh reads every value back
// as written whether the placeholder stands bare, in '...' or in "..."; a usage error naming an
// unknown placeholder, one whose value is empty (e.g. {model} without --model), or a value with a
// control character.
Expected<std::string> fill_placeholders(
    const std::string& command, const std::map<std::string, std::string>& words,
    const std::map<std::string, std::vector<std::string>>& word_lists = {});

// The names of the {name} placeholders in `command`, in order (braces around anything but a name
// of letters, digits and _ are the command's own, e.g. a JSON argument).
std::vector<std::string> placeholder_names(std::string_view command);

// A TCP port that is free on `host` now (bound to port 0 and closed); network error otherwise.
Expected<uint16_t> free_port(const std::string& host);

// True when something accepts TCP connections on host:port.
bool port_in_use(const std::string& host, uint16_t port);

// One line the server printed, stamped with the steady clock (ns) when kvprof read it.
struct LogLine {
  int64_t t_mono_ns = 0;
  uint64_t line_no = 0;  // 1-based
  std::string text;      // without the newline
};

// How the server ended.
struct StopOutcome {
  bool was_running = false;        // still running when stop() was called
  bool killed = false;             // SIGKILL was needed after the grace period
  std::optional<int> exit_code;    // when it exited
  std::optional<int> term_signal;  // when a signal ended it
  double stop_s = 0;               // from stop() to the whole group gone
  bool group_gone = false;         // no process of the group was left
};

class LaunchedServer {
 public:
  // Starts `/bin/sh -c command` in a new process group (stdin /dev/null, stdout and stderr into
  // one pipe), appends every byte to `log_path` and calls `on_line` (on the reader thread) with
  // each line; a watchdog process ends the group (SIGTERM, SIGKILL 5 s later) if kvprof dies
  // before stop(). io error when the log cannot be created or the process cannot be started.
  static Expected<std::unique_ptr<LaunchedServer>> start(
      const std::string& command, const std::filesystem::path& log_path,
      std::function<void(const LogLine&)> on_line);
  ~LaunchedServer();  // stop(2 s) when still running
  LaunchedServer(const LaunchedServer&) = delete;
  LaunchedServer& operator=(const LaunchedServer&) = delete;

  [[nodiscard]] pid_t pid() const { return m_pid; }
  [[nodiscard]] int64_t started_ns() const { return m_started_ns; }

  // True while the command's first process has not exited (reaps it when it has).
  bool running();

  // Waits until GET <root>/health or <root>/v1/models answers 200 (`headers` sent with each),
  // the process exits, `timeout_s` passes or `should_stop` says so. Returns the seconds from
  // start to ready, once every line printed before the answer has been handed to `on_line` (up
  // to 2 s more); a network error with the exit code or the timeout and the last lines of the
  // log, in one line; interrupted when stopped.
  Expected<double> wait_ready(const std::string& root, const std::vector<std::string>& headers,
                              double timeout_s, const std::function<bool()>& should_stop);

  // SIGTERM to the group, SIGKILL to what is left after `grace_s`; waits for the group to go.
  StopOutcome stop(double grace_s);

  // The last `n` lines of the log, oldest first.
  [[nodiscard]] std::vector<std::string> last_lines(size_t n) const;
  // "last lines of server.log: "a" | "b"" (or that it printed nothing), for one-line errors.
  [[nodiscard]] std::string log_tail_text(size_t n = 4) const;

 private:
  LaunchedServer() = default;
  void read_loop();
  void reap(bool block);
  bool group_alive() const;
  // Waits (up to `max_wait`) until the pipe is empty and the reader holds no line unhanded.
  void settle_reader(std::chrono::milliseconds max_wait);

  pid_t m_pid = -1;
  pid_t m_watchdog_pid = -1;  // ends the group if kvprof dies; killed by stop()
  int m_read_fd = -1;
  int m_log_fd = -1;
  int64_t m_started_ns = 0;
  std::optional<int> m_exit_code;
  std::optional<int> m_term_signal;
  bool m_reaped = false;
  bool m_stopped = false;
  std::function<void(const LogLine&)> m_on_line;
  std::thread m_reader;
  std::atomic<bool> m_closing{false};
  std::atomic<bool> m_reading{false};  // the reader has bytes out of the pipe not yet handed over
  mutable std::mutex m_tail_mutex;
  std::deque<std::string> m_tail;
};

}  // namespace kvprof::profile
