// Private to sim_server.cpp and sim_http.cpp: the state behind SimServer (Asio/Beast types stay
// out of the public header).
#pragma once

#include <utility>  // boost 1.74 asio/awaitable.hpp uses std::exchange without including it

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/live_state.hpp"
#include "kvprof/sim/sim_server.hpp"

namespace kvprof::sim {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// Engine outputs of one request, delivered on the io thread; `signal` wakes the session.
struct Channel {
  explicit Channel(const asio::any_io_executor& ex) : signal(ex) {}
  asio::steady_timer signal;
  std::deque<RequestOutput> events;
};

struct Submission {
  uint64_t request_id = 0;
  std::vector<uint32_t> prompt_token_ids;
  uint32_t max_tokens = 0;
  double arrival_s = 0;
  std::shared_ptr<Channel> channel;
};

class SimServer::Impl {
 public:
  explicit Impl(SimConfig config);

  Expected<void> bind();
  // Writes the idle live-state file (when configured) so it exists once start() returns.
  Expected<void> write_initial_live_state();
  void run_threads();
  void stop();

  // sim_http.cpp: the acceptor loop and one connection.
  asio::awaitable<void> listen();
  asio::awaitable<void> session(tcp::socket socket);
  // Serves one completion request; false when the connection must close.
  asio::awaitable<bool> handle_completion(tcp::socket& socket, const std::string& body, bool chat,
                                          bool keep_alive, const std::string& fault_header);

  // Engine-thread side.
  void engine_loop();
  void submit(Submission submission);
  void abort(uint64_t request_id);
  [[nodiscard]] double now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  }

  SimConfig m_config;
  std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
  asio::io_context m_ioc{1};
  tcp::acceptor m_acceptor{m_ioc};
  uint16_t m_port = 0;
  std::thread m_io_thread;
  std::thread m_engine_thread;
  std::atomic<bool> m_stopped{false};

  // Inbox of the engine thread.
  std::mutex m_mu;
  std::condition_variable m_cv;
  std::vector<Submission> m_inbox;
  std::vector<uint64_t> m_aborts;
  bool m_stopping = false;

  // Engine thread only (after start).
  Engine m_engine;
  LiveStateWriter m_live_writer;
  std::unordered_map<uint64_t, std::shared_ptr<Channel>> m_channels;

  // Counters (any thread).
  std::atomic<uint64_t> m_next_request_number{0};
  std::atomic<uint64_t> m_http_requests{0};
  std::atomic<uint64_t> m_rejected{0};
  std::atomic<uint64_t> m_faults{0};
  std::atomic<uint64_t> m_streams_aborted{0};
  mutable std::mutex m_stats_mu;
  EngineStats m_engine_stats;  // published after each step
  uint64_t m_live_state_writes = 0;
};

}  // namespace kvprof::sim
