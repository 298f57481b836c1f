// Test-only: a tiny dummy-weight llama GGUF (random weights, so greedy decoding gives varied
// tokens), `kvprof serve` run as a child process (its URL read from the first stdout line,
// stopped with SIGINT), and a blocking one-shot HTTP/1.1 POST/GET for its endpoints.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/resolve.hpp"

namespace kvprof::test {

// Writes a 2-layer llama GGUF with random f16 weights and a dummy vocabulary of `vocab_size`
// tokens ("w0 w1 ..." is one token per word, ids 261+K); false when it could not.
inline bool write_dummy_llama(const std::filesystem::path& gguf, uint32_t vocab_size = 1024) {
  const auto config = gguf.parent_path() / "config.json";
  std::ofstream(config)
      << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":)"
      << vocab_size << R"(,"max_position_embeddings":4096,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
  const auto spec = model::load_model(config.string());
  if (!spec) return false;
  const model::DummyGgufOptions options{1 /* F16 */, 7};
  const auto plan = model::plan_dummy_gguf(*spec, options);
  return plan && model::write_dummy_gguf(*plan, options, gguf).has_value();
}

struct HttpResult {
  int status = 0;
  std::string headers;  // the status line and header lines, as sent
  std::string body;
};

// One request on a fresh connection to 127.0.0.1:`port` (Connection: close); status 0 when the
// connection failed. Chunked bodies are returned as sent (framing included).
inline HttpResult http_request(uint16_t port, const std::string& method, const std::string& path,
                               const std::string& body = {},
                               const std::string& extra_headers = {}) {
  HttpResult r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  req += extra_headers;  // "Name: value\r\n" lines
  if (method == "POST") {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (all.size() > 12) r.status = std::atoi(all.substr(9, 3).c_str());
  if (const auto p = all.find("\r\n\r\n"); p != std::string::npos) {
    r.headers = all.substr(0, p + 2);
    r.body = all.substr(p + 4);
  }
  return r;
}

// `kvprof serve <args>` (or another serving subcommand, e.g. "serve-sim") in a child process;
// stopped (SIGINT, then waited for) on destruction.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args, const char* subcommand = "serve") {
    int out[2];
    if (::pipe(out) != 0) return;
    m_pid = ::fork();
    if (m_pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<std::string> all = {KVPROF_BIN, subcommand};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    m_out = ::fdopen(out[0], "r");
    char line[1024];
    if (m_out != nullptr && std::fgets(line, sizeof line, m_out) != nullptr) m_first_line = line;
    if (const auto p = m_first_line.find("http://127.0.0.1:"); p != std::string::npos) {
      m_port = static_cast<uint16_t>(std::atoi(m_first_line.c_str() + p + 17));
    }
  }
  ~ServeProcess() { stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  [[nodiscard]] uint16_t port() const { return m_port; }
  [[nodiscard]] const std::string& first_line() const { return m_first_line; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

  // SIGINT and wait; the exit code (-1 when it did not exit normally).
  int stop() {
    if (m_pid <= 0) return m_rc;
    ::kill(m_pid, SIGINT);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
    m_rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    m_pid = -1;
    if (m_out != nullptr) std::fclose(m_out);
    m_out = nullptr;
    return m_rc;
  }

 private:
  pid_t m_pid = -1;
  FILE* m_out = nullptr;
  std::string m_first_line;
  uint16_t m_port = 0;
  int m_rc = -1;
};

}  // namespace kvprof::test
