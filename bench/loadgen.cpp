// bench_loadgen: how much CPU kvprof's request runner spends per streamed token, and how many
// concurrent streams one event loop holds, compared with an asyncio + aiohttp client.
//
// A loopback stream server (tests/support/stream_server.hpp) runs in a forked child and streams
// as fast as it can. For each stream count M, kvprof's runner (libcurl multi, one thread) sends
// M requests at concurrency M; its CPU time comes from getrusage(RUSAGE_SELF). Then
// bench/loadgen_client.py does the same and its CPU time comes from wait4(). Printed: CPU
// seconds per million tokens for each, the ratio, and the most streams in flight.
//
// With --token-delay-us the server paces each stream like a decoding engine (one event per
// read for both clients); without it, it streams as fast as it can, which lets a slow client
// read many events per syscall.
//
//   bench_loadgen [--streams 100,1000,10000] [--tokens-total 1000000] [--token-delay-us US]
//                 [--no-python]
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

namespace {

double cpu_s(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
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

struct Measure {
  double cpu_s = 0, wall_s = 0;
  uint64_t tokens = 0, ok = 0, errors = 0, max_in_flight = 0;
};

Measure run_kvprof(const std::string& url, uint32_t streams, uint32_t tokens_per_stream) {
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
  kvprof::client::RequestRunner runner(options, kvprof::client::make_curl_transport());
  Measure m;
  runner.set_on_record([&](const kvprof::client::RequestRecord& rec) -> kvprof::Expected<void> {
    m.tokens += rec.tokens_streamed;
    if (rec.status == kvprof::client::RequestStatus::ok) {
      ++m.ok;
    } else {
      if (m.errors++ < 3) fmt::print(stderr, "  kvprof error: {}\n", rec.error_text);
    }
    return {};
  });
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  auto result = runner.run(requests);
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  getrusage(RUSAGE_SELF, &after);
  m.cpu_s = cpu_s(after) - cpu_s(before);
  if (result) m.max_in_flight = result->max_in_flight;
  return m;
}

Measure run_python(const std::string& url, uint32_t streams, uint32_t tokens_per_stream) {
  Measure m;
  int out_pipe[2];
  if (pipe(out_pipe) != 0) return m;
  const std::string script = std::string(KVPROF_SOURCE_DIR) + "/bench/loadgen_client.py";
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
  m.cpu_s = cpu_s(usage);
  auto doc = nlohmann::json::parse(output, nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) {
    m.tokens = doc.value("tokens", 0ull);
    m.ok = doc.value("requests", 0ull);
    m.errors = doc.value("errors", 0ull);
  } else {
    fmt::print(stderr, "  python client failed (exit {}): {}\n", WEXITSTATUS(status), output);
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> stream_counts = {100, 1000, 10000};
  uint64_t tokens_total = 1'000'000;
  bool python = true;
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
    } else if (a == "--no-python") {
      python = false;
    } else {
      fmt::print(stderr,
                 "usage: bench_loadgen [--streams 100,1000,10000] [--tokens-total N] "
                 "[--token-delay-us US] [--no-python]\n");
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
  fmt::print("stream server (pid {}) at {}, {}\n\n", server_pid, url,
             token_delay_us > 0 ? fmt::format("one token per stream every {} us", token_delay_us)
                                : std::string("streaming as fast as it can"));

  fmt::print("{:>8} {:>8} {:>10} | {:>10} {:>12} {:>9} {:>8} | {:>10} {:>12} {:>8} | {:>6}\n",
             "streams", "tok/str", "tokens", "kvprof cpu", "s/M tokens", "in-flight", "wall s",
             "python cpu", "s/M tokens", "wall s", "ratio");
  for (const uint32_t m : stream_counts) {
    if (m + 64 > nofile) {
      fmt::print("{:>8}  skipped: the open-file limit {} is too low\n", m, nofile);
      continue;
    }
    const auto per_stream = static_cast<uint32_t>(std::max<uint64_t>(20, tokens_total / m));
    const Measure k = run_kvprof(url, m, per_stream);
    const double k_per_m = k.tokens ? k.cpu_s / (static_cast<double>(k.tokens) / 1e6) : 0;
    std::string py_cols = fmt::format("{:>10} {:>12} {:>8} | {:>6}", "-", "-", "-", "-");
    if (python) {
      const Measure p = run_python(url, m, per_stream);
      const double p_per_m = p.tokens ? p.cpu_s / (static_cast<double>(p.tokens) / 1e6) : 0;
      py_cols = fmt::format("{:>10.2f} {:>12.2f} {:>8.2f} | {:>5.1f}x", p.cpu_s, p_per_m, p.wall_s,
                            k_per_m > 0 ? p_per_m / k_per_m : 0.0);
      if (p.errors > 0 || p.tokens != uint64_t{m} * per_stream) {
        py_cols += fmt::format("  (python: {} tokens, {} errors)", p.tokens, p.errors);
      }
    }
    fmt::print("{:>8} {:>8} {:>10} | {:>10.2f} {:>12.2f} {:>9} {:>8.2f} | {}", m, per_stream,
               k.tokens, k.cpu_s, k_per_m, k.max_in_flight, k.wall_s, py_cols);
    if (k.errors > 0) fmt::print("  (kvprof: {} errors)", k.errors);
    fmt::print("\n");
    std::fflush(stdout);
  }
  kill(server_pid, SIGTERM);
  waitpid(server_pid, nullptr, 0);
  return 0;
}
