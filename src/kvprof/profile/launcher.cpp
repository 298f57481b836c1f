// The launched server's process group, log tee and stop (see launcher.hpp).
#include "kvprof/profile/launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "kvprof/client/http_get.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/shell.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::profile {

namespace {

constexpr size_t k_tail_lines = 50;
constexpr size_t k_tail_line_chars = 400;

// A loopback or numeric IPv4 address to connect/bind to ("localhost" is 127.0.0.1).
bool to_sockaddr(const std::string& host, uint16_t port, sockaddr_in& out) {
  out = {};
  out.sin_family = AF_INET;
  out.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  return ::inet_pton(AF_INET, h.c_str(), &out.sin_addr) == 1;
}

// Where a placeholder stands in the command, as the shell reads it.
enum class Quoting { none, single, double_ };

// `value` written so that the shell reads it back unchanged at a place quoted as `q`.
std::string quoted_for(std::string_view value, Quoting q) {
  if (q == Quoting::none) return shell_quote(value);
  std::string out;
  for (char c : value) {
    if (q == Quoting::single && c == '\'') {
      out += "'\\''";
    } else if (q == Quoting::double_ && (c == '"' || c == '\\' || c == '$' || c == '`')) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

constexpr int64_t k_watchdog_grace_ns = 5'000'000'000;

// The watchdog's life, in a child forked from a threaded process: only async-signal-safe calls.
// It sleeps until kvprof dies (its parent-death signal, SIGTERM) and then ends the server's
// process group as stop() would: SIGTERM, then SIGKILL for what is left after the grace period.
// kvprof SIGKILLs it once the server is stopped.
[[noreturn]] void watchdog_main(pid_t parent, pid_t group) {
  ::setpgid(0, 0);  // its own group: stopping the server's group leaves it
  sigset_t term;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_SETMASK, &term, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  ::close_range(0, ~0U, 0);  // holds none of kvprof's pipes, sockets or files
  if (::getppid() == parent) {
    siginfo_t info;
    while (::sigwaitinfo(&term, &info) < 0 && errno == EINTR) {
    }
  }
  ::kill(-group, SIGTERM);
  const timespec step{0, 50'000'000};
  for (int64_t waited_ns = 0; waited_ns < k_watchdog_grace_ns; waited_ns += step.tv_nsec) {
    if (::kill(-group, 0) != 0 && errno == ESRCH) ::_exit(0);
    ::nanosleep(&step, nullptr);
  }
  ::kill(-group, SIGKILL);
  ::_exit(0);
}

bool identifier(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) != 0) return false;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> placeholder_names(std::string_view command) {
  std::vector<std::string> names;
  for (size_t i = command.find('{'); i != std::string_view::npos; i = command.find('{', i + 1)) {
    const size_t close = command.find('}', i);
    if (close == std::string_view::npos) break;
    const std::string_view name = command.substr(i + 1, close - i - 1);
    if (identifier(name)) names.emplace_back(name);
  }
  return names;
}

Expected<std::string> fill_placeholders(
    const std::string& command, const std::map<std::string, std::string>& words,
    const std::map<std::string, std::vector<std::string>>& word_lists) {
  // The text that stands for placeholder `name` at a place quoted as `q`.
  const auto value_text = [&](const std::string& name, Quoting q) -> Expected<std::string> {
    std::vector<std::string> values;
    if (const auto word = words.find(name); word != words.end()) {
      if (!word->second.empty()) values.push_back(word->second);
    } else if (const auto list = word_lists.find(name); list != word_lists.end()) {
      values = list->second;
    } else {
      return fail(ErrorKind::usage,
                  fmt::format("--launch: unknown placeholder {{{}}} (known: {{model}}, {{port}}, "
                              "{{max_concurrency}}, {{host}})",
                              name));
    }
    if (values.empty()) {
      return fail(ErrorKind::usage, fmt::format("--launch uses {{{}}} but it has no value{}", name,
                                                name == "model" ? ": pass --model" : ""));
    }
    std::string out;
    for (const auto& v : values) {
      if (has_control_chars(v)) {
        return fail(ErrorKind::usage, fmt::format("the value of {{{}}} holds a control character; "
                                                  "it is not passed to the launch command",
                                                  name));
      }
      out += (out.empty() ? "" : " ") + quoted_for(v, q);
    }
    return out;
  };
  std::string out;
  Quoting q = Quoting::none;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    const size_t close = c == '{' ? command.find('}', i) : std::string::npos;
    // {name} with a name of letters, digits and _ is a placeholder; other braces (a JSON argument
    // such as --kv-transfer-config '{"kv_connector": ...}') are the command's own.
    if (close != std::string::npos && identifier(command.substr(i + 1, close - i - 1))) {
      auto text = value_text(command.substr(i + 1, close - i - 1), q);
      if (!text) return std::unexpected(text.error());
      out += *text;
      i = close;
      continue;
    }
    out += c;
    if (q != Quoting::single && c == '\\' && i + 1 < command.size()) {
      out += command[++i];  // an escaped character: no quote starts or ends here
    } else if (c == '\'' && q != Quoting::double_) {
      q = q == Quoting::single ? Quoting::none : Quoting::single;
    } else if (c == '"' && q != Quoting::single) {
      q = q == Quoting::double_ ? Quoting::none : Quoting::double_;
    }
  }
  return out;
}

Expected<uint16_t> free_port(const std::string& host) {
  sockaddr_in addr{};
  if (!to_sockaddr(host, 0, addr)) {
    return fail(ErrorKind::usage, fmt::format("--launch-host '{}' is not an IPv4 address", host));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(ErrorKind::network, std::string("socket: ") + std::strerror(errno));
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    return fail(ErrorKind::network,
                fmt::format("no free port on {}: {}", host, std::strerror(err)));
  }
  return ntohs(addr.sin_port);
}

bool port_in_use(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  if (!to_sockaddr(host, port, addr)) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return connected;
}

Expected<std::unique_ptr<LaunchedServer>> LaunchedServer::start(
    const std::string& command, const std::filesystem::path& log_path,
    std::function<void(const LogLine&)> on_line) {
  std::unique_ptr<LaunchedServer> s(new LaunchedServer());
  s->m_on_line = std::move(on_line);
  s->m_log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s->m_log_fd < 0) {
    return fail(ErrorKind::io,
                fmt::format("cannot write '{}': {}", log_path.string(), std::strerror(errno)));
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return fail(ErrorKind::io, std::string("pipe: ") + std::strerror(errno));
  }
  // Processes of the group orphaned by their parent come to kvprof, which reaps them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return fail(ErrorKind::io, std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists whichever side runs first
  ::close(fds[1]);
  s->m_pid = pid;
  // The server's own processes do not all get a parent-death signal (only the shell does), so a
  // watchdog ends the group if kvprof is killed; without one the server would outlive kvprof.
  const pid_t watchdog = ::fork();
  if (watchdog == 0) watchdog_main(parent, pid);
  s->m_watchdog_pid = watchdog;
  s->m_read_fd = fds[0];
  s->m_started_ns = monotonic_now_ns();
  s->m_reader = std::thread([p = s.get()] { p->read_loop(); });
  return s;
}

LaunchedServer::~LaunchedServer() {
  stop(2.0);
}

void LaunchedServer::read_loop() {
  std::string partial;
  uint64_t line_no = 0;
  char buf[65536];
  const auto emit = [&](std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // server.log keeps the bytes as printed; the lines handed on (startup timeline, engine
    // figures, error tails) are valid UTF-8, so the run's JSON files can hold them.
    LogLine l{monotonic_now_ns(), ++line_no, to_valid_utf8(line)};
    if (m_on_line) m_on_line(l);
    std::lock_guard lock(m_tail_mutex);
    m_tail.emplace_back(utf8_prefix(l.text, k_tail_line_chars));
    if (m_tail.size() > k_tail_lines) m_tail.pop_front();
  };
  for (;;) {
    pollfd p{m_read_fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready == 0) {
      if (m_closing.load()) break;  // the group is gone; an escaped process keeps the pipe open
      continue;
    }
    if (ready < 0 && errno == EINTR) continue;
    m_reading.store(true);  // before the read: settle_reader() sees an empty pipe only after it
    const ssize_t n = ready < 0 ? -1 : ::read(m_read_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      m_reading.store(false);
      continue;
    }
    if (n <= 0) {
      m_reading.store(false);
      break;
    }
    if (m_log_fd >= 0 && ::write(m_log_fd, buf, static_cast<size_t>(n)) != n) {
      ::close(m_log_fd);  // a full disk: the log stops, the server is still watched
      m_log_fd = -1;
    }
    partial.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(partial.substr(start, nl - start));
    }
    partial.erase(0, start);
    if (partial.size() > (1U << 20)) {  // a "line" of a megabyte: hand it over as it is
      emit(std::move(partial));
      partial.clear();
    }
    m_reading.store(false);
  }
  if (!partial.empty()) emit(std::move(partial));
}

void LaunchedServer::reap(bool block) {
  if (m_pid <= 0) return;
  if (!m_reaped) {
    int status = 0;
    const pid_t r = ::waitpid(m_pid, &status, block ? 0 : WNOHANG);
    if (r == m_pid) {
      m_reaped = true;
      if (WIFEXITED(status)) m_exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) m_term_signal = WTERMSIG(status);
    } else if (r < 0 && errno == ECHILD) {
      m_reaped = true;
    }
  }
  // Other processes of the group that came to kvprof as their subreaper.
  int status = 0;
  while (::waitpid(-m_pid, &status, WNOHANG) > 0) {
  }
}

void LaunchedServer::settle_reader(std::chrono::milliseconds max_wait) {
  const int64_t deadline = monotonic_now_ns() + std::chrono::nanoseconds(max_wait).count();
  while (monotonic_now_ns() < deadline) {
    int queued = 0;
    // The pipe first, then the flag: bytes read after the check were written after the answer.
    if (::ioctl(m_read_fd, FIONREAD, &queued) != 0) return;
    if (queued == 0 && !m_reading.load()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool LaunchedServer::group_alive() const {
  return m_pid > 0 && (::kill(-m_pid, 0) == 0 || errno == EPERM);
}

bool LaunchedServer::running() {
  reap(false);
  return !m_reaped;
}

Expected<double> LaunchedServer::wait_ready(const std::string& root,
                                            const std::vector<std::string>& headers,
                                            double timeout_s,
                                            const std::function<bool()>& should_stop) {
  client::HttpGetOptions options;
  options.timeout_ms = 1000;
  options.connect_timeout_ms = 500;
  options.max_body_bytes = 1U << 20;
  options.headers = headers;
  client::HttpGetter getter;
  const auto since_start = [&] {
    return static_cast<double>(monotonic_now_ns() - m_started_ns) / 1e9;
  };
  for (;;) {
    if (!running()) {
      m_closing.store(true);
      if (m_reader.joinable()) m_reader.join();  // every line it printed is in the tail
      const std::string how = m_exit_code ? fmt::format("exited with code {}", *m_exit_code)
                              : m_term_signal
                                  ? fmt::format("was killed by signal {} ({})", *m_term_signal,
                                                ::strsignal(*m_term_signal))
                                  : std::string("ended");
      return fail(
          ErrorKind::network,
          fmt::format("the launched server {} after {:.1f} s, before it answered {}/health; "
                      "{}",
                      how, since_start(), root, log_tail_text()));
    }
    for (const char* path : {"/health", "/v1/models"}) {
      auto r = getter.get(root + path, options);
      if (r && r->status == 200 && running()) {
        const double ready_s = since_start();
        // The lines printed before the answer may still be in the pipe or the reader's hands
        // on a loaded machine; the startup timeline needs them before "ready" is marked.
        settle_reader(std::chrono::milliseconds(2000));
        return ready_s;
      }
    }
    if (should_stop && should_stop()) {
      return fail(ErrorKind::interrupted, "interrupted while the launched server was starting");
    }
    if (since_start() >= timeout_s) {
      return fail(ErrorKind::network,
                  fmt::format("the launched server did not answer {}/health or /v1/models within "
                              "{:.0f} s (--launch-timeout); {}",
                              root, timeout_s, log_tail_text()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

StopOutcome LaunchedServer::stop(double grace_s) {
  StopOutcome out;
  if (m_stopped || m_pid <= 0) return out;
  m_stopped = true;
  const int64_t t0 = monotonic_now_ns();
  out.was_running = running();
  const auto wait_gone = [&](double seconds) {
    const int64_t end = monotonic_now_ns() + static_cast<int64_t>(seconds * 1e9);
    for (;;) {
      reap(false);
      if (m_reaped && !group_alive()) return true;
      if (monotonic_now_ns() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  ::kill(-m_pid, SIGTERM);
  if (!wait_gone(grace_s)) {
    ::kill(-m_pid, SIGKILL);
    out.killed = true;
    wait_gone(5.0);
  }
  out.group_gone = !group_alive();
  if (m_watchdog_pid > 0) {
    ::kill(m_watchdog_pid, SIGKILL);
    ::waitpid(m_watchdog_pid, nullptr, 0);
    m_watchdog_pid = -1;
  }
  out.exit_code = m_exit_code;
  out.term_signal = m_term_signal;
  out.stop_s = static_cast<double>(monotonic_now_ns() - t0) / 1e9;
  m_closing.store(true);
  if (m_reader.joinable()) m_reader.join();
  if (m_read_fd >= 0) ::close(m_read_fd);
  if (m_log_fd >= 0) ::close(m_log_fd);
  m_read_fd = m_log_fd = -1;
  return out;
}

std::vector<std::string> LaunchedServer::last_lines(size_t n) const {
  std::lock_guard lock(m_tail_mutex);
  const size_t from = m_tail.size() > n ? m_tail.size() - n : 0;
  return {m_tail.begin() + static_cast<std::ptrdiff_t>(from), m_tail.end()};
}

std::string LaunchedServer::log_tail_text(size_t n) const {
  const auto lines = last_lines(n);
  if (lines.empty()) return "it printed nothing (server.log is empty)";
  std::string text = "last lines of server.log:";
  for (size_t i = 0; i < lines.size(); ++i) {
    text += (i == 0 ? " \"" : " | \"") + lines[i] + "\"";
  }
  return text;
}

}  // namespace kvprof::profile
