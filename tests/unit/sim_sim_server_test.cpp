// Tests for src/kvprof/sim/sim_server.cpp and sim_backend.cpp behind serve/server: the simulated
// server over real loopback sockets with a raw HTTP/1.1 client: SSE shape, usage, errors, metrics,
// faults, concurrency, and the live-state file.
#include "kvprof/sim/sim_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kvprof/sim/live_state.hpp"
#include "kvprof/sim/tokenizer.hpp"

namespace kvprof::sim {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  bool complete = false;                       // false: the connection ended mid-response
  std::vector<double> chunk_times_s;           // arrival of each chunk, from the request
};

// A blocking HTTP/1.1 client on one keep-alive connection.
class Conn {
 public:
  explicit Conn(uint16_t port) {
    m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(m_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    m_connected = ::connect(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Conn() { ::close(m_fd); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  Response request(const std::string& method, const std::string& path, const std::string& body = "",
                   const std::string& extra_headers = "") {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!body.empty() || method == "POST") {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    req += extra_headers + "\r\n" + body;
    m_sent = Clock::now();
    if (!m_connected ||
        ::send(m_fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      return {};
    }
    return read_response();
  }

 private:
  bool fill() {
    char tmp[65536];
    const ssize_t n = ::recv(m_fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    m_buf.append(tmp, static_cast<size_t>(n));
    return true;
  }
  bool read_line(std::string& line) {
    size_t pos;
    while ((pos = m_buf.find("\r\n")) == std::string::npos) {
      if (!fill()) return false;
    }
    line = m_buf.substr(0, pos);
    m_buf.erase(0, pos + 2);
    return true;
  }
  bool read_exact(size_t n, std::string& out) {
    while (m_buf.size() < n) {
      if (!fill()) return false;
    }
    out.append(m_buf, 0, n);
    m_buf.erase(0, n);
    return true;
  }
  Response read_response() {
    Response r;
    std::string line;
    if (!read_line(line) || line.size() < 12) return r;
    r.status = std::stoi(line.substr(9, 3));
    while (read_line(line) && !line.empty()) {
      const auto colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (auto& c : name)
        c = static_cast<char>(std::tolower(c));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    if (r.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        if (!read_line(line)) return r;
        const size_t size = std::stoul(line, nullptr, 16);
        std::string chunk;
        if (!read_exact(size + 2, chunk)) return r;
        r.chunk_times_s.push_back(std::chrono::duration<double>(Clock::now() - m_sent).count());
        if (size == 0) break;
        r.body += chunk.substr(0, size);
      }
    } else {
      const size_t length =
          std::stoul(r.headers.count("content-length") ? r.headers["content-length"] : "0");
      if (!read_exact(length, r.body)) return r;
    }
    r.complete = true;
    return r;
  }

  int m_fd = -1;
  bool m_connected = false;
  std::string m_buf;
  Clock::time_point m_sent;
};

// The data payloads of an SSE body; `bad_lines` counts lines that are not "data: ..." events.
std::vector<std::string> sse_data(const std::string& body, int* bad_lines = nullptr) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    if (event.starts_with("data: ")) {
      out.push_back(event.substr(6));
    } else if (bad_lines != nullptr) {
      ++*bad_lines;
    }
    pos = end + 2;
  }
  return out;
}

SimConfig test_config() {
  SimConfig c;
  c.model = "sim-model";
  c.quiet = true;
  c.num_gpu_blocks = 512;
  c.max_model_len = 2048;
  c.step_base_ms = 1.0;
  return c;
}

std::unique_ptr<SimServer> start_server(const SimConfig& c) {
  auto server = SimServer::start(c);
  if (!server) ADD_FAILURE() << server.error().message;
  return server ? std::move(*server) : nullptr;
}

std::string completion_body(const std::string& prompt, int max_tokens, bool stream,
                            bool include_usage = false) {
  json j{
      {"model", "sim-model"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}};
  if (include_usage) j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

TEST(SimServer, AnswersModelsHealthVersionAndSaysItIsSimulated) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->base_url(), "http://127.0.0.1:" + std::to_string(server->port()) + "/v1");
  Conn conn(server->port());
  const auto models = conn.request("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.headers.at("x-kvprof-simulated"), "1");
  const auto list = json::parse(models.body);
  EXPECT_EQ(list["data"][0]["id"], "sim-model");
  EXPECT_EQ(list["data"][0]["owned_by"], "kvprof-sim");
  EXPECT_EQ(list["data"][0]["max_model_len"], 2048);
  EXPECT_EQ(conn.request("GET", "/health").status, 200);
  const auto version = conn.request("GET", "/version");
  EXPECT_NE(version.body.find("SIMULATED"), std::string::npos);
  EXPECT_EQ(conn.request("GET", "/nope").status, 404);
  EXPECT_EQ(conn.request("GET", "/v1/completions").status, 405);
  EXPECT_EQ(conn.request("POST", "/v1/completions", "{not json").status, 400);
}

TEST(SimServer, StreamsWellFormedSseWithFinalUsageChunk) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const auto tok = conn.request("POST", "/tokenize", R"({"prompt": "one two six four five"})");
  ASSERT_EQ(tok.status, 200);
  EXPECT_EQ(json::parse(tok.body)["count"], 5);

  const auto r = conn.request("POST", "/v1/completions",
                              completion_body("one two six four five", 7, true, true));
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.headers.at("content-type").rfind("text/event-stream", 0), 0u);
  int bad = 0;
  const auto events = sse_data(r.body, &bad);
  EXPECT_EQ(bad, 0);
  ASSERT_EQ(events.size(), 7u + 1u + 1u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i < 7; ++i) {
    const auto chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["model"], "sim-model");
    text += chunk["choices"][0]["text"].get<std::string>();
    if (i + 1 < 7) {
      EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
    } else {
      EXPECT_EQ(chunk["choices"][0]["finish_reason"], "length");
    }
  }
  EXPECT_EQ(sim_tokenize(text).size(), 7u);
  const auto usage = json::parse(events[7]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 7);
  EXPECT_EQ(usage["usage"]["total_tokens"], 12);
  // Same connection again (keep-alive), no usage asked: no usage chunk.
  const auto again = conn.request("POST", "/v1/completions", completion_body("x", 3, true));
  EXPECT_EQ(sse_data(again.body).size(), 3u + 1u);
}

TEST(SimServer, ChatStreamStartsWithRoleChunk) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const json body{{"model", "sim-model"},
                  {"messages", json::array({{{"role", "user"}, {"content", "say hi"}}})},
                  {"max_tokens", 4},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}}};
  const auto r = conn.request("POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200);
  const auto events = sse_data(r.body);
  ASSERT_EQ(events.size(), 1u + 4u + 1u + 1u);
  const auto first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(json::parse(events[1])["choices"][0]["delta"]["content"].get<std::string>().empty());
  EXPECT_EQ(json::parse(events[4])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[5])["usage"]["prompt_tokens"], 2 + 2 + 1);
}

TEST(SimServer, NonStreamingCompletionCarriesUsage) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const auto r = conn.request("POST", "/v1/completions", completion_body("a b c", 9, false));
  ASSERT_EQ(r.status, 200);
  const auto j = json::parse(r.body);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 9);
  EXPECT_EQ(sim_tokenize(j["choices"][0]["text"].get<std::string>()).size(), 9u);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST(SimServer, RejectsTooLongRequestsAndOtherModelsLikeVllm) {
  SimConfig c = test_config();
  c.max_model_len = 128;
  auto server = start_server(c);
  ASSERT_TRUE(server);
  Conn conn(server->port());
  json body{{"model", "sim-model"}, {"prompt", std::vector<int>(100, 300)}, {"max_tokens", 50}};
  const auto r = conn.request("POST", "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 400);
  const auto err = json::parse(r.body)["error"];
  EXPECT_EQ(err["code"], 400);
  EXPECT_EQ(err["type"], "BadRequestError");
  EXPECT_NE(err["message"].get<std::string>().find("maximum context length is 128 tokens"),
            std::string::npos);
  body["max_tokens"] = 28;
  EXPECT_EQ(conn.request("POST", "/v1/completions", body.dump()).status, 200);
  body["model"] = "other";
  EXPECT_EQ(conn.request("POST", "/v1/completions", body.dump()).status, 404);
  EXPECT_GE(server->stats().rejected_total, 2u);
}

// The engine counts a request as finished just after its last chunk is sent, so a client can
// see the response before the counters move: wait (bounded) for them.
template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 200; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST(SimServer, MetricsFollowTheEngine) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  conn.request("POST", "/v1/completions", completion_body("p q r s", 5, true));
  conn.request("POST", "/v1/completions", completion_body("p q r s", 6, false));
  ASSERT_TRUE(eventually([&] { return server->stats().engine.requests_finished_total >= 2; }));
  const auto m = conn.request("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  const std::string l = R"({engine="0",model_name="sim-model"})";
  EXPECT_NE(m.body.find("vllm:generation_tokens_total" + l + " 11.0\n"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("vllm:prompt_tokens_total" + l + " 8.0\n"), std::string::npos);
  EXPECT_NE(m.body.find("vllm:num_requests_running" + l + " 0.0\n"), std::string::npos);
  EXPECT_NE(m.body.find("vllm:kv_cache_usage_perc" + l + " 0.0\n"), std::string::npos);
  EXPECT_NE(m.body.find("vllm:time_to_first_token_seconds_count" + l + " 2.0\n"),
            std::string::npos);
  EXPECT_NE(m.body.find(R"(block_size="16")"), std::string::npos);
  EXPECT_NE(m.body.find(R"(num_gpu_blocks="512")"), std::string::npos);
  EXPECT_NE(m.body.find("# TYPE vllm:num_preemptions_total counter"), std::string::npos);
}

TEST(SimServer, ManyConcurrentStreamsAllCompleteAndPreemptionsShowInMetrics) {
  SimConfig c = test_config();
  c.num_gpu_blocks = 24;  // 384 tokens: 16 requests of 40 + 40 tokens cannot all fit
  c.max_model_len = 256;
  auto server = start_server(c);
  ASSERT_TRUE(server);
  constexpr int k_clients = 16;
  std::vector<int> tokens(k_clients, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_clients; ++i) {
    threads.emplace_back([&, i] {
      Conn conn(server->port());
      std::vector<int> prompt(40);
      for (int k = 0; k < 40; ++k)
        prompt[k] = 1000 + i * 40 + k;
      const json body{{"prompt", prompt}, {"max_tokens", 40}, {"stream", true}};
      const auto r = conn.request("POST", "/v1/completions", body.dump());
      const auto events = sse_data(r.body);
      if (r.complete && !events.empty() && events.back() == "[DONE]") {
        tokens[i] = static_cast<int>(events.size()) - 1;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (int i = 0; i < k_clients; ++i)
    EXPECT_EQ(tokens[i], 40) << "client " << i;
  EXPECT_TRUE(eventually([&] {
    return server->stats().engine.requests_finished_total >= static_cast<uint64_t>(k_clients);
  }));
  const auto stats = server->stats();
  EXPECT_EQ(stats.engine.requests_finished_total, static_cast<uint64_t>(k_clients));
  EXPECT_GT(stats.engine.num_preemptions_total, 0u);
  Conn conn(server->port());
  const auto m = conn.request("GET", "/metrics");
  EXPECT_EQ(m.body.find(R"(vllm:num_preemptions_total{engine="0",model_name="sim-model"} 0.0)"),
            std::string::npos);
}

TEST(SimServer, ResetFaultClosesMidStream) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const auto r = conn.request("POST", "/v1/completions", completion_body("a", 20, true),
                              "X-Kvprof-Fault: reset;after=3\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.complete);
  const auto events = sse_data(r.body);
  EXPECT_EQ(events.size(), 3u);
  for (const auto& e : events)
    EXPECT_NE(e, "[DONE]");
  EXPECT_EQ(server->stats().faults_injected_total, 1u);
}

TEST(SimServer, StatusFaultsAnswerErrorsAndRetryAfter) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const auto limited = conn.request("POST", "/v1/completions", completion_body("a", 2, true),
                                    "X-Kvprof-Fault: 429;retry_after=2\r\n");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.headers.at("retry-after"), "2");
  EXPECT_EQ(json::parse(limited.body)["error"]["code"], 429);
  EXPECT_EQ(conn.request("POST", "/v1/completions", completion_body("a", 2, true),
                         "X-Kvprof-Fault: 500\r\n")
                .status,
            500);
  EXPECT_EQ(conn.request("POST", "/v1/completions", completion_body("a", 2, true),
                         "X-Kvprof-Fault: 503\r\n")
                .status,
            503);
  EXPECT_EQ(conn.request("POST", "/v1/completions", completion_body("a", 2, true),
                         "X-Kvprof-Fault: meteor\r\n")
                .status,
            400);
}

TEST(SimServer, MalformedFaultSendsBrokenEvents) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const auto r = conn.request("POST", "/v1/completions", completion_body("a", 4, true),
                              "X-Kvprof-Fault: malformed;after=1\r\n");
  ASSERT_TRUE(r.complete);
  int bad = 0;
  const auto events = sse_data(r.body, &bad);
  EXPECT_GE(bad, 1);
  int unparsable = 0;
  for (const auto& e : events) {
    if (e != "[DONE]" && json::parse(e, nullptr, false).is_discarded()) ++unparsable;
  }
  EXPECT_EQ(unparsable, 1);
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST(SimServer, StallAndSlowFirstTokenDelayTheStream) {
  auto server = start_server(test_config());
  ASSERT_TRUE(server);
  Conn conn(server->port());
  const auto stalled = conn.request("POST", "/v1/completions", completion_body("a", 4, true),
                                    "X-Kvprof-Fault: stall;after=2;seconds=0.3\r\n");
  ASSERT_TRUE(stalled.complete);
  ASSERT_GE(stalled.chunk_times_s.size(), 4u);
  // Chunks: token 1, token 2, (stall), token 3 ...
  EXPECT_GE(stalled.chunk_times_s[2] - stalled.chunk_times_s[1], 0.25);
  EXPECT_EQ(sse_data(stalled.body).size(), 5u);

  const auto slow = conn.request("POST", "/v1/completions", completion_body("a", 2, true),
                                 "X-Kvprof-Fault: slow_first_token;seconds=0.3\r\n");
  ASSERT_TRUE(slow.complete);
  EXPECT_GE(slow.chunk_times_s.front(), 0.25);
  const auto quick = conn.request("POST", "/v1/completions", completion_body("a", 2, true));
  EXPECT_LT(quick.chunk_times_s.front(), 0.25);
}

TEST(SimServer, GlobalFaultRateIsDeterministicBySeed) {
  auto pattern = [](uint64_t seed, double rate) {
    SimConfig c = test_config();
    c.fault.kind = FaultKind::status_503;
    c.fault_rate = rate;
    c.fault_seed = seed;
    auto server = start_server(c);
    std::string out;
    Conn conn(server->port());
    for (int i = 0; i < 24; ++i) {
      out += conn.request("POST", "/v1/completions", completion_body("a", 1, false)).status == 503
                 ? 'F'
                 : '.';
    }
    return out;
  };
  const std::string a = pattern(7, 0.5);
  EXPECT_EQ(a, pattern(7, 0.5));
  EXPECT_NE(a.find('F'), std::string::npos);
  EXPECT_NE(a.find('.'), std::string::npos);
  EXPECT_EQ(pattern(7, 1.0), std::string(24, 'F'));
}

std::optional<LiveMemory> read_live(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_live_state(ss.str());
}

TEST(SimServer, LiveStateFileTracksUsedBlocks) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kvprof_sim_live_" + std::to_string(::getpid())))
          .string();
  SimConfig c = test_config();
  c.kv_pool_mode = KvPoolMode::on_demand;
  c.activation_bytes_per_token = 0;
  c.step_base_ms = 8;
  c.live_state_path = path;
  const uint64_t base = sim_used_bytes(c, 0, 0);
  auto server = start_server(c);
  ASSERT_TRUE(server);
  auto idle = read_live(path);
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->used_bytes, base);
  EXPECT_EQ(idle->total_bytes, c.total_bytes);
  EXPECT_EQ(idle->pid, static_cast<uint32_t>(::getpid()));

  std::thread client([&] {
    Conn conn(server->port());
    conn.request("POST", "/v1/completions",
                 json{{"prompt", std::vector<int>(40, 500)}, {"max_tokens", 30}}.dump());
  });
  uint64_t max_blocks = 0;
  bool all_whole_blocks = true;
  const auto until = Clock::now() + std::chrono::seconds(3);
  while (Clock::now() < until) {
    if (auto m = read_live(path)) {
      const uint64_t kv = m->used_bytes - base;
      all_whole_blocks &= kv % c.kv_bytes_per_block == 0;
      max_blocks = std::max(max_blocks, kv / c.kv_bytes_per_block);
    }
    if (server->stats().engine.requests_finished_total == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  client.join();
  EXPECT_TRUE(all_whole_blocks);
  EXPECT_GE(max_blocks, 3u);  // 40 prompt tokens = 3 blocks, growing to 5 (69 computed tokens)
  EXPECT_LE(max_blocks, 5u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(read_live(path)->used_bytes, base);  // blocks freed
  server->stop();
  const auto gone = read_live(path);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->used_bytes, 0u);
  EXPECT_EQ(gone->pid, 0u);
  std::filesystem::remove(path);
}

TEST(SimServer, LiveStateActivationDropsBackWhenIdle) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kvprof_sim_act_" + std::to_string(::getpid())))
          .string();
  SimConfig c = test_config();
  c.step_base_ms = 5;
  c.live_state_path = path;
  const uint64_t base = sim_used_bytes(c, 0, 0);
  auto server = start_server(c);
  ASSERT_TRUE(server);
  std::thread client([&] {
    Conn conn(server->port());
    conn.request("POST", "/v1/completions", completion_body("a b c d", 40, false));
  });
  uint64_t peak = 0;
  const auto until = Clock::now() + std::chrono::seconds(3);
  while (Clock::now() < until && server->stats().engine.requests_finished_total == 0) {
    if (auto m = read_live(path)) peak = std::max(peak, m->used_bytes);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  client.join();
  EXPECT_GT(peak, base);  // one decode token or the 4-token prefill in flight
  EXPECT_LE(peak, base + 4 * c.activation_bytes_per_token);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(read_live(path)->used_bytes, base);
  server->stop();
  std::filesystem::remove(path);
}

TEST(SimServer, UnwritableLiveStateFileFailsStart) {
  SimConfig c = test_config();
  c.live_state_path = "/nonexistent-kvprof-dir/live";
  const auto server = SimServer::start(c);
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.error().kind, ErrorKind::io);
}

TEST(SimServer, RefusesNonLoopbackAddresses) {
  SimConfig c = test_config();
  c.host = "0.0.0.0";
  const auto server = SimServer::start(c);
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.error().kind, ErrorKind::usage);
}

}  // namespace
}  // namespace kvprof::sim
