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

#include <cerrno>
#include <chrono>
#include <cstring>

#include "kvprof/client/http_get.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::profile {

namespace {

constexpr size_t k_tail_lines = 50;
constexpr size_t k_tail_line_chars = 400;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A loopback or numeric IPv4 address to connect/bind to ("localhost" is 127.0.0.1).
bool to_sockaddr(const std::string& host, uint16_t port, sockaddr_in& out) {
  out = {};
  out.sin_family = AF_INET;
  out.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  return ::inet_pton(AF_INET, h.c_str(), &out.sin_addr) == 1;
}

}  // namespace

Expected<std::string> fill_placeholders(const std::string& command,
                                        const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < command.size()) {
    const size_t open = command.find('{', i);
    if (open == std::string::npos) break;
    const size_t close = command.find('}', open);
    if (close == std::string::npos) break;
    const std::string name = command.substr(open + 1, close - open - 1);
    out += command.substr(i, open - i);
    const auto it = values.find(name);
    if (it == values.end()) {
      return fail(ErrorKind::usage,
                  fmt::format("--launch: unknown placeholder {{{}}} (known: {{model}}, {{port}}, "
                              "{{max_concurrency}}, {{host}})",
                              name));
    }
    if (it->second.empty()) {
      return fail(ErrorKind::usage, fmt::format("--launch uses {{{}}} but it has no value{}", name,
                                                name == "model" ? ": pass --model" : ""));
    }
    out += it->second;
    i = close + 1;
  }
  out += command.substr(i);
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
  s->m_read_fd = fds[0];
  s->m_started_ns = now_ns();
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
    LogLine l{now_ns(), ++line_no, to_valid_utf8(line)};
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
  const int64_t deadline = now_ns() + std::chrono::nanoseconds(max_wait).count();
  while (now_ns() < deadline) {
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
  const auto since_start = [&] { return static_cast<double>(now_ns() - m_started_ns) / 1e9; };
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
  const int64_t t0 = now_ns();
  out.was_running = running();
  const auto wait_gone = [&](double seconds) {
    const int64_t end = now_ns() + static_cast<int64_t>(seconds * 1e9);
    for (;;) {
      reap(false);
      if (m_reaped && !group_alive()) return true;
      if (now_ns() >= end) return false;
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
  out.exit_code = m_exit_code;
  out.term_signal = m_term_signal;
  out.stop_s = static_cast<double>(now_ns() - t0) / 1e9;
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
