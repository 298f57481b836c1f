// run_command: posix_spawn + poll on two pipes + deadline.
#include "kvprof/sys/subprocess.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kvprof/util/strings.hpp"

extern char** environ;

namespace kvprof::sys {
namespace {

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides)
      replaced = replaced || k == key;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides)
    env.push_back(k + "=" + v);
  return env;
}

}  // namespace

std::optional<std::string> find_executable(const std::string& name, const std::string& path_list) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
  }
  for (const std::string& dir : split(path_list, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

std::string CommandResult::first_line() const {
  std::string text = stderr_text.empty() ? stdout_text : stderr_text;
  text = text.substr(0, text.find('\n'));
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  return text.empty() ? fmt::format("exit code {}", exit_code) : text;
}

Expected<CommandResult> run_command(const std::vector<std::string>& argv,
                                    const CommandOptions& options) {
  if (argv.empty()) return fail(ErrorKind::internal, "run_command: empty argv");
  std::string path_list;
  if (const char* p = std::getenv("PATH")) path_list = p;
  for (const auto& [k, v] : options.env) {
    if (k == "PATH") path_list = v;
  }
  const auto program = find_executable(argv[0], path_list);
  if (!program) return fail(ErrorKind::not_found, fmt::format("'{}' not found", argv[0]));

  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return fail(ErrorKind::io, fmt::format("pipe: {}", std::strerror(errno)));
  }
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return fail(ErrorKind::io, fmt::format("pipe: {}", std::strerror(errno)));
  }
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT})
    sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env = child_environment(options.env);
  std::vector<char*> envp;
  for (auto& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args)
    argp.push_back(a.data());
  argp.push_back(nullptr);

  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program->c_str(), &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return fail(ErrorKind::io, fmt::format("cannot run '{}': {}", *program, std::strerror(rc)));
  }
  out_w.reset();
  err_w.reset();
  if (options.on_spawn) options.on_spawn(pid);

  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  auto remaining_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<long long>(0, left.count()));
  };
  char buffer[4096];
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
    const int left = remaining_ms();
    if (left == 0) {
      result.timed_out = true;
      break;
    }
    const int n = ::poll(fds, 2, left);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      Fd& fd = i == 0 ? out_r : err_r;
      std::string& text = i == 0 ? result.stdout_text : result.stderr_text;
      const ssize_t got = ::read(fd.fd, buffer, sizeof buffer);
      if (got > 0) {
        const size_t room =
            options.max_output_bytes - std::min(options.max_output_bytes, text.size());
        text.append(buffer, std::min(room, static_cast<size_t>(got)));
      } else if (got == 0 || errno != EINTR) {
        fd.reset();
      }
    }
  }
  auto kill_group = [&] {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  };
  if (result.timed_out) kill_group();
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    const pid_t w = ::waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (w == pid) {
      reaped = true;
    } else if (w < 0) {
      if (errno != EINTR) break;
    } else if (remaining_ms() == 0) {  // still running (it closed its pipes)
      result.timed_out = true;
      kill_group();
    } else {
      ::usleep(5000);
    }
  }
  if (!reaped) return fail(ErrorKind::io, fmt::format("cannot wait for '{}'", *program));
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace kvprof::sys
