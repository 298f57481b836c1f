// The request runner's event loop: schedules sends per condition (closed or open loop), drives
// the transport, and turns finished streams into records and statistics.
#include "kvprof/client/runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "kvprof/client/raw_request.hpp"
#include "kvprof/sys/open_files.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/workload/repeat.hpp"

namespace kvprof::client {

using workload::Arrival;
using workload::PromptFormat;
using workload::RequestSpec;

namespace {
// The longest poll() wait, so a raised stop flag is seen quickly.
constexpr int k_max_poll_ms = 50;
}  // namespace

Expected<void> validate(const RunOptions& options, const std::vector<RequestSpec>& requests) {
  if (options.endpoint.empty()) return fail(ErrorKind::usage, "no endpoint URL given");
  if (!(options.request_timeout_s > 0) || !(options.connect_timeout_s > 0)) {
    return fail(ErrorKind::usage, "timeouts must be positive");
  }
  if (options.transport == TransportKind::raw &&
      !is_plain_http_url(endpoint_url(options.endpoint, options.api))) {
    return fail(ErrorKind::usage, "the raw transport serves http:// endpoints only; use curl");
  }
  uint64_t in_flight = 0;
  for (const auto& r : requests)
    in_flight = std::max<uint64_t>(in_flight, r.concurrency);
  if (auto files = sys::check_open_files_for(in_flight); !files) return files;
  if (options.api == ApiKind::chat) {
    for (const auto& r : requests) {
      if (r.prompt_format == PromptFormat::tokens) {
        return fail(ErrorKind::usage,
                    "the chat API needs text prompts: generate the workload with "
                    "--prompt-format text, or use --api completions");
      }
    }
  }
  return {};
}

std::unique_ptr<Transport> make_run_transport(const RunOptions& options) {
  RawOptions raw;
  raw.read_interval_us = options.read_interval_us;
  return make_transport(options.transport, options.endpoint, raw);
}

std::string build_body(const RequestSpec& r, const RunOptions& options) {
  GenerationParams params;
  params.model = options.model;
  params.max_tokens = r.max_tokens;
  params.ignore_eos = r.ignore_eos;
  params.temperature = options.temperature;
  if (r.prompt_format == PromptFormat::tokens) {
    return build_completions_body(r.prompt_token_ids, params);
  }
  return build_text_body(options.api, r.prompt_text, params);
}

struct RequestRunner::Impl {
  RunOptions options;
  std::unique_ptr<Transport> transport;
  std::function<void(const Progress&)> progress;
  std::function<Expected<void>(const RequestRecord&)> on_record;
  std::chrono::steady_clock::time_point t0;
  double run_start_unix_s = 0;
  bool clock_started = false;
  std::string url;
  std::vector<std::string> headers;

  // Per-run state.
  struct InFlight {
    uint64_t handle = 0;
    std::unique_ptr<ResponseSink> sink;
  };
  std::unordered_map<const ResponseSink*, InFlight> in_flight;
  std::vector<ResponseSink*> finished;
  std::unique_ptr<ConditionAccumulator> acc;
  Progress prog;
  std::optional<Error> record_error;
  uint64_t max_in_flight = 0;

  // t0 on the monotonic_now_ns() clock (steady_clock's).
  int64_t origin_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  }

  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                t0)
        .count();
  }

  void send(const RequestSpec& r, int64_t intended_ns, uint32_t repeat) {
    RequestRecord record;
    record.request_id = r.request_id;
    record.repeat = repeat;
    record.condition_id = r.condition_id;
    record.input_len = r.input_len;
    record.max_tokens = r.max_tokens;
    record.input_len_exact = r.prompt_format == PromptFormat::tokens;
    record.intended_send_ns = intended_ns;
    HttpRequest http;
    http.url = url;
    http.body = build_body(repeat == 0 ? r : workload::repeat_of(r, repeat), options);
    http.headers = headers;
    http.timeout_s = options.request_timeout_s;
    http.connect_timeout_s = options.connect_timeout_s;
    record.actual_send_ns = now_ns();
    auto sink = std::make_unique<ResponseSink>(std::move(record), RunClock{origin_ns()},
                                               options.keep_token_times,
                                               [this](ResponseSink& s) { finished.push_back(&s); });
    ResponseSink* raw = sink.get();
    const uint64_t handle = transport->start(std::move(http), raw);
    in_flight.emplace(raw, InFlight{handle, std::move(sink)});
    max_in_flight = std::max<uint64_t>(max_in_flight, in_flight.size());
  }

  // Moves finished sinks out of in_flight into records and statistics.
  void collect() {
    if (finished.empty()) return;
    std::vector<ResponseSink*> done;
    done.swap(finished);
    for (ResponseSink* s : done) {
      const RequestRecord& record = s->record();
      acc->add(record);
      ++prog.done;
      if (record.status == RequestStatus::ok) ++prog.ok;
      if (record.status == RequestStatus::error) ++prog.errors;
      if (record.status == RequestStatus::cancelled) ++prog.cancelled;
      if (on_record && !record_error) {
        if (auto ok = on_record(record); !ok) record_error = ok.error();
      }
      if (progress) progress(prog);
      in_flight.erase(s);
    }
  }

  void cancel_all() {
    std::vector<uint64_t> handles;
    handles.reserve(in_flight.size());
    for (const auto& [sink, f] : in_flight)
      handles.push_back(f.handle);
    for (const uint64_t h : handles)
      transport->cancel(h);
    // Transfers that could not start end on the next poll.
    for (int i = 0; i < 100 && finished.size() < in_flight.size(); ++i)
      transport->poll(0);
    collect();
  }
};

RequestRunner::RequestRunner(RunOptions options, std::unique_ptr<Transport> transport)
    : m_impl(std::make_unique<Impl>()) {
  m_impl->options = std::move(options);
  m_impl->transport = std::move(transport);
}

RequestRunner::RequestRunner(RunOptions options) : RequestRunner(std::move(options), nullptr) {}

RequestRunner::~RequestRunner() = default;

void RequestRunner::set_progress(std::function<void(const Progress&)> callback) {
  m_impl->progress = std::move(callback);
}

void RequestRunner::set_on_record(std::function<Expected<void>(const RequestRecord&)> callback) {
  m_impl->on_record = std::move(callback);
}

double RequestRunner::start_clock() {
  if (!m_impl->clock_started) {
    m_impl->t0 = std::chrono::steady_clock::now();
    m_impl->run_start_unix_s = unix_now_s();
    m_impl->clock_started = true;
  }
  return m_impl->run_start_unix_s;
}

Expected<RunResult> RequestRunner::run(const std::vector<RequestSpec>& requests,
                                       const std::function<bool()>& should_stop) {
  Impl& m = *m_impl;
  if (auto ok = validate(m.options, requests); !ok) return std::unexpected(ok.error());
  if (!m.transport) m.transport = make_run_transport(m.options);
  if (!m.transport) return fail(ErrorKind::internal, "the HTTP client could not be initialised");
  m.url = endpoint_url(m.options.endpoint, m.options.api);
  m.headers.clear();
  if (!m.options.api_key.empty()) m.headers.push_back("Authorization: Bearer " + m.options.api_key);
  start_clock();

  RunResult result;
  result.run_start_unix_s = m.run_start_unix_s;
  const auto conditions = workload::conditions_of(requests);
  const auto stopped = [&] { return should_stop && should_stop(); };

  for (size_t ci = 0; ci < conditions.size() && !result.stopped; ++ci) {
    if (stopped()) {  // stopped between conditions: the next one is not started
      result.stopped = true;
      break;
    }
    const auto& cond = conditions[ci];
    const RequestSpec& head = requests[cond.first];
    const uint32_t concurrency = std::max<uint32_t>(1, head.concurrency);
    m.acc = std::make_unique<ConditionAccumulator>(cond.id, concurrency);
    m.prog = Progress{};
    m.prog.condition_index = ci;
    m.prog.n_conditions = conditions.size();
    m.prog.condition_id = cond.id;
    m.prog.total = cond.count;
    if (m.progress) m.progress(m.prog);
    const int64_t cond_start_ns = m.now_ns();
    const int64_t min_ns = static_cast<int64_t>(std::llround(m.options.min_condition_s * 1e9));
    size_t next = cond.first;
    const size_t end = cond.first + cond.count;
    uint32_t pass = 0;                      // 0: the workload's requests; n: the n-th repeat
    int64_t pass_start_ns = cond_start_ns;  // open loop: send offsets count from here

    while (true) {
      if (stopped()) {
        result.stopped = true;
        if (next >= end && m.in_flight.empty()) break;  // stopped after its last one ended
        m.cancel_all();
        m.prog.stopped = true;
        break;
      }
      if (m.record_error) {
        m.cancel_all();
        break;
      }
      int timeout_ms = k_max_poll_ms;
      while (m.in_flight.size() < concurrency) {
        if (next >= end) {
          // Every request was sent: repeat them while the condition is shorter than asked (and
          // none failed: a failing server is not asked again and again). Its length is the span
          // its statistics report (the ends are read times, which may precede this clock's now).
          if (m.acc->span_ns() >= min_ns || m.prog.errors > 0) break;
          pass_start_ns +=
              static_cast<int64_t>(std::llround(requests[end - 1].send_offset_s * 1e9));
          next = cond.first;
          ++pass;
        }
        const RequestSpec& r = requests[next];
        if (r.arrival == Arrival::poisson) {
          const int64_t due_ns =
              pass_start_ns + static_cast<int64_t>(std::llround(r.send_offset_s * 1e9));
          const int64_t wait_ns = due_ns - m.now_ns();
          if (wait_ns > 0) {
            timeout_ms = std::min<int64_t>(timeout_ms, (wait_ns + 999'999) / 1'000'000);
            break;
          }
          m.send(r, due_ns, pass);
        } else {
          m.send(r, m.now_ns(), pass);
        }
        if (pass > 0) ++m.prog.total;
        ++next;
      }
      if (next >= end && m.in_flight.empty()) break;
      m.transport->poll(timeout_ms);
      m.collect();
    }
    ConditionStats stats = m.acc->finish();
    stats.n_planned = cond.count;
    stats.interrupted = m.prog.stopped;
    m.prog.condition_done = true;
    if (m.progress) m.progress(m.prog);
    result.conditions.push_back(std::move(stats));
  }
  result.max_in_flight = m.max_in_flight;
  result.transport = m.transport->counters();
  if (m.record_error) return std::unexpected(*m.record_error);
  return result;
}

}  // namespace kvprof::client
