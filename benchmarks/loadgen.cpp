// bench_loadgen: how much CPU kvprof's request runner spends per streamed token, and how many
// concurrent streams one event loop holds, compared with an asyncio + aiohttp client.
//
// A loopback stream server (tests/support/stream_server.hpp) runs in a forked child and streams
// as fast as it can. For each stream count M, kvprof's runner (one thread) sends M requests at
// concurrency M, once over the raw HTTP/1.1 transport and once over libcurl multi; its CPU time
// (user + system) comes from getrusage(RUSAGE_SELF). Then benchmarks/loadgen_client.py does the
// same and its CPU time comes from wait4(). Printed: CPU seconds per million tokens for each, the
// user/system split, the ratio Python / kvprof (all CPU, and user CPU alone), its ceiling (the
// all-CPU ratio if kvprof spent no user CPU: Python's CPU over kvprof's system CPU, which is
// the kernel's receive path and no client code can remove), and the most streams in flight.
//
// With --token-delay-us the server paces each stream like a decoding engine (one event per
// read for both clients); without it, it streams as fast as it can, which lets a slow client
// read many events per syscall. "tok/read" says how many tokens one read delivered on average:
// tokens sharing a read share a timestamp, so it is each client's timing granularity.
// --read-intervals runs the raw transport once per RawOptions::read_interval_us given.
// The "floor" row (loadgen_floor.hpp; --no-floor leaves it out) is a client that only reads the
// same streams as they arrive, with no parsing: the kernel's share that no client avoids.
//
//   bench_loadgen [--streams 100,1000,10000] [--tokens-total 1000000] [--token-delay-us US]
//                 [--transports raw,curl] [--read-intervals 0,1000] [--no-floor] [--no-python]
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../tests/support/stream_server.hpp"
#include "kvprof/client/runner.hpp"
#include "kvprof/util/strings.hpp"
#include "loadgen_floor.hpp"

namespace {

double user_s(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec) + static_cast<double>(r.ru_utime.tv_usec) / 1e6;
}
double sys_s(const rusage& r) {
  return static_cast<double>(r.ru_stime.tv_sec) + static_cast<double>(r.ru_stime.tv_usec) / 1e6;
}

// Raises the open-file limit to the hard limit; returns the new soft limit.
rlim_t raise_nofile() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  getrlimit(RLIMIT_NOFILE, &lim);
  return lim.rlim_cur;
}

// CPU seconds (user + system) the process `pid` has used so far, from /proc/PID/stat; loopback
// TCP puts part of one side's work on the other, so the server's share is printed too.
double process_cpu_s(pid_t pid) {
  std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
  if (f == nullptr) return 0;
  char buf[1024] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  if (p == nullptr || n == 0) return 0;
  unsigned long utime = 0, stime = 0;
  // After ") ": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) !=
      2) {
    return 0;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Measure {
  double user_s = 0, sys_s = 0, wall_s = 0;
  double server_cpu_s = 0;  // the stream server's CPU over the same run
  uint64_t tokens = 0, ok = 0, errors = 0, max_in_flight = 0;
  uint64_t reads = 0, kernel_timestamped_reads = 0;
  [[nodiscard]] double cpu_s() const { return user_s + sys_s; }
  [[nodiscard]] double per_m_tokens(double s) const {
    return tokens ? s / (static_cast<double>(tokens) / 1e6) : 0;
  }
};

Measure run_kvprof(const std::string& url, uint32_t streams, uint32_t tokens_per_stream,
                   kvprof::client::TransportKind kind, uint32_t read_interval_us) {
  std::vector<kvprof::workload::RequestSpec> requests(streams);
  for (uint32_t i = 0; i < streams; ++i) {
    auto& r = requests[i];
    r.request_id = i;
    r.condition_id = "bench";
    r.input_len = 4;
    r.output_len = r.max_tokens = tokens_per_stream;
    r.concurrency = streams;
    r.prompt_token_ids = {1000, 1001, 1002, 1003};
  }
  kvprof::client::RunOptions options;
  options.endpoint = url;
  options.model = "fake";
  options.connect_timeout_s = 60;
  options.transport = kind;
  options.read_interval_us = read_interval_us;
  kvprof::client::RequestRunner runner(options);
  Measure m;
  runner.set_on_record([&](const kvprof::client::RequestRecord& rec) -> kvprof::Expected<void> {
    m.tokens += rec.tokens_streamed;
    if (rec.status == kvprof::client::RequestStatus::ok) {
      ++m.ok;
    } else {
      if (m.errors++ < 3) {
        fmt::print(stderr, "  kvprof {} error: {}\n", kvprof::client::transport_kind_name(kind),
                   rec.error_text);
      }
    }
    return {};
  });
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  auto result = runner.run(requests);
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  getrusage(RUSAGE_SELF, &after);
  m.user_s = user_s(after) - user_s(before);
  m.sys_s = sys_s(after) - sys_s(before);
  if (result) {
    m.max_in_flight = result->max_in_flight;
    m.reads = kind == kvprof::client::TransportKind::raw ? result->transport.reads : 0;
    m.kernel_timestamped_reads = result->transport.kernel_timestamped_reads;
  }
  return m;
}

Measure run_python(const std::string& url, uint32_t streams, uint32_t tokens_per_stream) {
  Measure m;
  int out_pipe[2];
  if (pipe(out_pipe) != 0) return m;
  const std::string script = std::string(KVPROF_SOURCE_DIR) + "/benchmarks/loadgen_client.py";
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    const std::string conc = std::to_string(streams), toks = std::to_string(tokens_per_stream);
    const std::string full_url = url + "/v1/completions";
    execl("/usr/bin/python3", "python3", script.c_str(), "--url", full_url.c_str(), "--concurrency",
          conc.c_str(), "--requests", conc.c_str(), "--max-tokens", toks.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = read(out_pipe[0], buf, sizeof buf)) > 0;)
    output.append(buf, n);
  close(out_pipe[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.user_s = user_s(usage);
  m.sys_s = sys_s(usage);
  auto doc = nlohmann::json::parse(output, nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) {
    m.tokens = doc.value("tokens", 0ull);
    m.ok = doc.value("requests", 0ull);
    m.errors = doc.value("errors", 0ull);
    m.reads = doc.value("reads", 0ull);
  } else {
    fmt::print(stderr, "  python client failed (exit {}): {}\n", WEXITSTATUS(status), output);
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  using kvprof::client::TransportKind;
  std::vector<uint32_t> stream_counts = {100, 1000, 10000};
  std::vector<TransportKind> transports = {TransportKind::raw, TransportKind::curl};
  std::vector<uint32_t> read_intervals_us = {0, 1000};
  uint64_t tokens_total = 1'000'000;
  bool python = true;
  bool floor_client = true;
  uint32_t token_delay_us = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--streams" && i + 1 < argc) {
      stream_counts.clear();
      for (const auto& s : kvprof::split(argv[++i], ','))
        stream_counts.push_back(std::stoul(s));
    } else if (a == "--tokens-total" && i + 1 < argc) {
      tokens_total = std::stoull(argv[++i]);
    } else if (a == "--token-delay-us" && i + 1 < argc) {
      token_delay_us = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (a == "--transports" && i + 1 < argc) {
      transports.clear();
      for (const auto& s : kvprof::split(argv[++i], ',')) {
        auto kind = kvprof::client::parse_transport_kind(s);
        if (!kind || *kind == TransportKind::automatic) {
          fmt::print(stderr, "--transports takes raw and/or curl\n");
          return 2;
        }
        transports.push_back(*kind);
      }
    } else if (a == "--read-intervals" && i + 1 < argc) {
      read_intervals_us.clear();
      for (const auto& s : kvprof::split(argv[++i], ','))
        read_intervals_us.push_back(static_cast<uint32_t>(std::stoul(s)));
    } else if (a == "--no-python") {
      python = false;
    } else if (a == "--no-floor") {
      floor_client = false;
    } else {
      fmt::print(stderr,
                 "usage: bench_loadgen [--streams 100,1000,10000] [--tokens-total N] "
                 "[--token-delay-us US] [--transports raw,curl] [--read-intervals 0,1000] "
                 "[--no-floor] [--no-python]\n");
      return 2;
    }
  }
  const rlim_t nofile = raise_nofile();
  fmt::print("open-file limit: {}\n", nofile);

  int port_pipe[2];
  if (pipe(port_pipe) != 0) return 1;
  const pid_t server_pid = fork();
  if (server_pid == 0) {
    close(port_pipe[0]);
    kvprof::testing::StreamServerOptions so;
    so.threads = 1;
    so.events_per_write = 1;
    so.token_delay_us = token_delay_us;
    so.max_kept_bodies = 0;
    kvprof::testing::StreamServer server(so);
    const uint16_t port = server.port();
    if (write(port_pipe[1], &port, sizeof port) != sizeof port) _exit(1);
    for (;;)
      pause();
  }
  close(port_pipe[1]);
  uint16_t port = 0;
  if (read(port_pipe[0], &port, sizeof port) != sizeof port) return 1;
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  fmt::print("stream server (pid {}) at {}, {}\n", server_pid, url,
             token_delay_us > 0 ? fmt::format("one token per stream every {} us", token_delay_us)
                                : std::string("streaming as fast as it can"));
  fmt::print(
      "per client: CPU s (user+sys), CPU s per million tokens (user/sys split), the most streams "
      "in flight, tokens per read (timing granularity; k = share of reads with a kernel receive "
      "time), wall s, the server's CPU s per million tokens meanwhile; ratio = Python CPU per "
      "token / kvprof's, user + system and user alone; ceiling = the all-CPU ratio kvprof would "
      "reach with no user CPU at all, its system CPU kept\n\n");
  fmt::print("{:>8} {:>8} {:>10} | {:<18} {:>8} {:>22} {:>9} {:>14} {:>8} {:>10} | {:>25}\n",
             "streams", "tok/str", "tokens", "client", "cpu s", "s/M tokens (usr/sys)", "in-flight",
             "tok/read (k)", "wall s", "server s/M", "ratio (all/usr, ceiling)");

  const auto row = [](std::string_view name, const Measure& m, std::string_view ratio) {
    std::string per_read = "-";
    if (m.reads > 0) {
      per_read =
          fmt::format("{:.2f}", static_cast<double>(m.tokens) / static_cast<double>(m.reads));
      if (m.kernel_timestamped_reads > 0) {
        per_read +=
            fmt::format(" ({:.0f}%)", 100.0 * static_cast<double>(m.kernel_timestamped_reads) /
                                          static_cast<double>(m.reads));
      }
    }
    return fmt::format("{:<18} {:>8.2f} {:>22} {:>9} {:>14} {:>8.2f} {:>10.2f} | {:>25}", name,
                       m.cpu_s(),
                       fmt::format("{:.2f} ({:.2f}/{:.2f})", m.per_m_tokens(m.cpu_s()),
                                   m.per_m_tokens(m.user_s), m.per_m_tokens(m.sys_s)),
                       m.max_in_flight > 0 ? std::to_string(m.max_in_flight) : std::string("-"),
                       per_read, m.wall_s, m.per_m_tokens(m.server_cpu_s), ratio);
  };
  for (const uint32_t m : stream_counts) {
    if (m + 64 > nofile) {
      fmt::print("{:>8}  skipped: the open-file limit {} is too low\n", m, nofile);
      continue;
    }
    const auto per_stream = static_cast<uint32_t>(std::max<uint64_t>(20, tokens_total / m));
    const uint64_t expected = uint64_t{m} * per_stream;
    std::vector<std::pair<std::string, Measure>> kv;
    const auto with_server_cpu = [&](auto&& run) {
      const double before = process_cpu_s(server_pid);
      Measure r = run();
      r.server_cpu_s = process_cpu_s(server_pid) - before;
      return r;
    };
    for (const TransportKind kind : transports) {
      // The read interval is the raw transport's; libcurl reads on every arrival.
      const std::vector<uint32_t> intervals =
          kind == TransportKind::raw ? read_intervals_us : std::vector<uint32_t>{0};
      for (const uint32_t interval_us : intervals) {
        std::string name = fmt::format("kvprof {}", kvprof::client::transport_kind_name(kind));
        if (kind == TransportKind::raw) name += fmt::format(" {}us", interval_us);
        kv.emplace_back(name, with_server_cpu([&] {
                          return run_kvprof(url, m, per_stream, kind, interval_us);
                        }));
      }
    }
    if (floor_client) {
      kv.emplace_back("floor (bare epoll)", with_server_cpu([&] {
                        const auto f = kvprof::bench::run_floor_client(port, m, per_stream);
                        if (!f.error.empty()) fmt::print(stderr, "  floor client: {}\n", f.error);
                        Measure r;
                        r.user_s = f.user_s;
                        r.sys_s = f.sys_s;
                        r.wall_s = f.wall_s;
                        r.ok = f.streams_done;
                        r.errors = m - f.streams_done;
                        r.tokens = f.streams_done * per_stream;  // what each stream was asked for
                        r.reads = f.reads;
                        r.max_in_flight = m;
                        return r;
                      }));
    }
    Measure p;
    if (python) p = with_server_cpu([&] { return run_python(url, m, per_stream); });
    const double p_per_m = p.per_m_tokens(p.cpu_s());
    const std::string lead = fmt::format("{:>8} {:>8} {:>10} | ", m, per_stream, expected);
    const std::string blank = fmt::format("{:>8} {:>8} {:>10} | ", "", "", "");
    bool first = true;
    for (const auto& [name, k] : kv) {
      const double k_per_m = k.per_m_tokens(k.cpu_s());
      const double k_user_per_m = k.per_m_tokens(k.user_s);
      const double k_sys_per_m = k.per_m_tokens(k.sys_s);
      const std::string ratio =
          python && k_per_m > 0 && k_user_per_m > 0 && k_sys_per_m > 0
              ? fmt::format("{:.1f}x / {:.1f}x, {:.1f}x", p_per_m / k_per_m,
                            p.per_m_tokens(p.user_s) / k_user_per_m, p_per_m / k_sys_per_m)
              : std::string("-");
      fmt::print("{}{}", first ? lead : blank, row(name, k, ratio));
      if (k.errors > 0 || k.tokens != expected) {
        fmt::print("  ({} tokens, {} errors)", k.tokens, k.errors);
      }
      fmt::print("\n");
      first = false;
    }
    if (python) {
      fmt::print("{}{}", first ? lead : blank, row("python", p, ""));
      if (p.errors > 0 || p.tokens != expected) {
        fmt::print("  ({} tokens, {} errors)", p.tokens, p.errors);
      }
      fmt::print("\n");
    }
    std::fflush(stdout);
  }
  kill(server_pid, SIGTERM);
  waitpid(server_pid, nullptr, 0);
  return 0;
}
