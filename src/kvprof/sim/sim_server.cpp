// SimServer lifecycle (bind, threads, stop) and the engine thread's step loop, which paces
// steps by the simulated step time and keeps the live-state file current.
#include "kvprof/sim/sim_server_impl.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "kvprof/sim/live_state.hpp"

namespace kvprof::sim {

SimServer::Impl::Impl(SimConfig config)
    : m_config(std::move(config)),
      m_engine(m_config),
      m_live_writer(m_config.live_state_path, std::chrono::microseconds(static_cast<int64_t>(
                                                  m_config.live_state_min_interval_ms * 1000.0))) {
  m_engine_stats = m_engine.stats();
}

Expected<void> SimServer::Impl::write_initial_live_state() {
  if (m_config.live_state_path.empty()) return {};
  const LiveMemory idle{m_config.total_bytes, m_config.reserved_bytes,
                        sim_used_bytes(m_config, 0, 0), static_cast<uint32_t>(::getpid())};
  m_live_writer.update(idle, std::chrono::steady_clock::now());
  if (!m_live_writer.last_error().empty()) {
    return fail(ErrorKind::io, "live-state file: " + m_live_writer.last_error());
  }
  return {};
}

Expected<void> SimServer::Impl::bind() {
  std::string host = m_config.host;
  if (host == "localhost" || host == "LOCALHOST") host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec || !address.is_loopback()) {
    return fail(ErrorKind::usage,
                fmt::format("serve-sim binds loopback addresses only, not '{}'", m_config.host));
  }
  const tcp::endpoint endpoint(address, m_config.port);
  m_acceptor.open(endpoint.protocol(), ec);
  if (!ec) m_acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m_acceptor.bind(endpoint, ec);
  if (!ec) m_acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return fail(ErrorKind::network, fmt::format("cannot listen on {}:{}: {}", m_config.host,
                                                m_config.port, ec.message()));
  }
  m_port = m_acceptor.local_endpoint(ec).port();
  return {};
}

void SimServer::Impl::run_threads() {
  asio::co_spawn(m_ioc, listen(), asio::detached);
  m_io_thread = std::thread([this] {
    auto guard = asio::make_work_guard(m_ioc);
    m_ioc.run();
  });
  m_engine_thread = std::thread([this] { engine_loop(); });
}

void SimServer::Impl::stop() {
  if (m_stopped.exchange(true)) return;
  {
    std::lock_guard lock(m_mu);
    m_stopping = true;
  }
  m_cv.notify_all();
  if (m_engine_thread.joinable()) m_engine_thread.join();
  m_ioc.stop();
  if (m_io_thread.joinable()) m_io_thread.join();
}

void SimServer::Impl::submit(Submission submission) {
  {
    std::lock_guard lock(m_mu);
    m_inbox.push_back(std::move(submission));
  }
  m_cv.notify_one();
}

void SimServer::Impl::abort(uint64_t request_id) {
  {
    std::lock_guard lock(m_mu);
    m_aborts.push_back(request_id);
  }
  m_cv.notify_one();
}

void SimServer::Impl::engine_loop() {
  using Clock = std::chrono::steady_clock;
  const auto interval =
      std::chrono::microseconds(static_cast<int64_t>(m_config.live_state_min_interval_ms * 1000.0));
  LiveStateWriter writer(m_config.live_state_path, interval);
  const auto pid = static_cast<uint32_t>(::getpid());
  auto memory_now = [&](uint32_t step_tokens) {
    return LiveMemory{m_config.total_bytes, m_config.reserved_bytes,
                      sim_used_bytes(m_config, m_engine.block_pool().num_used(), step_tokens), pid};
  };
  auto publish = [&] {
    std::lock_guard lock(m_stats_mu);
    m_engine_stats = m_engine.stats();
    m_live_state_writes = writer.writes();
  };
  writer.update(memory_now(0), Clock::now());
  publish();

  for (;;) {
    std::vector<Submission> submissions;
    std::vector<uint64_t> aborts;
    {
      std::unique_lock lock(m_mu);
      auto ready = [&] {
        return m_stopping || !m_inbox.empty() || !m_aborts.empty() || m_engine.has_unfinished();
      };
      while (!ready()) {
        if (const auto due = writer.pending_due()) {
          if (m_cv.wait_until(lock, *due, ready)) break;
          lock.unlock();
          writer.flush(Clock::now());
          publish();
          lock.lock();
        } else {
          m_cv.wait(lock, ready);
        }
      }
      if (m_stopping) break;
      submissions.swap(m_inbox);
      aborts.swap(m_aborts);
    }
    for (auto& s : submissions) {
      m_engine.add_request(s.request_id, std::move(s.prompt_token_ids), s.max_tokens, s.arrival_s);
      m_channels[s.request_id] = std::move(s.channel);
    }
    for (uint64_t id : aborts) {
      m_engine.abort_request(id);
      m_channels.erase(id);
    }
    if (!m_engine.has_unfinished()) {
      writer.update(memory_now(0), Clock::now());
      publish();
      continue;
    }

    const auto step_start = Clock::now();
    const StepPlan plan = m_engine.schedule();
    writer.update(memory_now(plan.num_tokens()), step_start);
    publish();
    const double step_ms = sim_step_ms(m_config, plan.num_prefill_tokens, plan.num_decode_tokens);
    const auto step_end =
        step_start + std::chrono::microseconds(static_cast<int64_t>(step_ms * 1000));
    {
      std::unique_lock lock(m_mu);
      if (m_cv.wait_until(lock, step_end, [&] { return m_stopping; })) break;
    }
    auto outputs = m_engine.complete_step(now_s());
    // As an engine frees a finished request's memory before its answer leaves: once idle, the
    // idle figures are published before any client can see the last token (a profile's
    // baseline, right after its probe request, never reads the probe's step).
    const bool idle = !m_engine.has_unfinished();
    if (idle) {
      writer.update(memory_now(0), Clock::now());
      writer.flush(Clock::now(), /*force=*/true);
    }
    for (auto& out : outputs) {
      const auto it = m_channels.find(out.request_id);
      if (it == m_channels.end()) continue;
      std::shared_ptr<Channel> channel = it->second;
      if (out.finished) m_channels.erase(it);
      asio::post(m_ioc, [channel, event = std::move(out)]() mutable {
        channel->events.push_back(std::move(event));
        channel->signal.cancel();
      });
    }
    publish();
  }
  m_channels.clear();
  // The simulated process is gone: no process line, nothing in use.
  writer.update(LiveMemory{m_config.total_bytes, m_config.reserved_bytes, 0, 0}, Clock::now());
  writer.flush(Clock::now(), /*force=*/true);
  publish();
}

// ---- SimServer ----

SimServer::SimServer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

SimServer::~SimServer() {
  stop();
}

Expected<std::unique_ptr<SimServer>> SimServer::start(const SimConfig& config) {
  if (auto ok = validate_sim_config(config); !ok) return std::unexpected(ok.error());
  auto impl = std::make_unique<Impl>(config);
  if (auto ok = impl->bind(); !ok) return std::unexpected(ok.error());
  if (auto ok = impl->write_initial_live_state(); !ok) return std::unexpected(ok.error());
  impl->run_threads();
  std::unique_ptr<SimServer> server(new SimServer(std::move(impl)));
  if (!config.quiet) {
    std::fprintf(stderr,
                 "kvprof-sim: SIMULATED vllm engine (no GPU, no model weights) serving '%s' on "
                 "%s: %u KV blocks x %u tokens, max_num_seqs=%u, max_model_len=%u\n",
                 config.model.c_str(), server->base_url().c_str(), config.num_gpu_blocks,
                 config.block_size, config.max_num_seqs, config.max_model_len);
  }
  return server;
}

uint16_t SimServer::port() const {
  return m_impl->m_port;
}

std::string SimServer::base_url() const {
  const std::string& host = m_impl->m_config.host;
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return fmt::format("http://{}{}{}:{}/v1", v6 ? "[" : "", host, v6 ? "]" : "", port());
}

const SimConfig& SimServer::config() const {
  return m_impl->m_config;
}

void SimServer::stop() {
  if (m_impl) m_impl->stop();
}

SimStats SimServer::stats() const {
  SimStats s;
  s.http_requests_total = m_impl->m_http_requests.load();
  s.completion_requests_total = m_impl->m_next_request_number.load();
  s.rejected_total = m_impl->m_rejected.load();
  s.faults_injected_total = m_impl->m_faults.load();
  s.streams_aborted_total = m_impl->m_streams_aborted.load();
  std::lock_guard lock(m_impl->m_stats_mu);
  s.engine = m_impl->m_engine_stats;
  s.live_state_writes = m_impl->m_live_state_writes;
  return s;
}

}  // namespace kvprof::sim
