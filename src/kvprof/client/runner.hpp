// RequestRunner: executes a workload's conditions in order against an OpenAI-compatible server,
// one condition at a time, on one event loop (the calling thread).
//
// Closed loop (arrival "closed"): keeps `concurrency` requests in flight until the condition's
// requests are sent; a request's intended send time is the moment its slot freed.
// Open loop (arrival "poisson"): sends each request at condition start + send_offset_s, never
// more than `concurrency` in flight; a request held back by that cap keeps its scheduled time
// as its intended send, so TTFT / E2E include the wait (no coordinated omission).
// Each condition ends when all its requests have ended (and, with min_condition_s, the repeats
// sent until it lasted that long); the next starts then.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvprof/client/openai.hpp"
#include "kvprof/client/request_record.hpp"
#include "kvprof/client/stats.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::client {

struct RunOptions {
  std::string endpoint = "http://127.0.0.1:8000";  // base URL, ".../v1" or the full endpoint
  std::string model;                               // empty: left out of the request
  ApiKind api = ApiKind::completions;
  double request_timeout_s = 600.0;
  double connect_timeout_s = 30.0;
  std::string api_key;  // sent as "Authorization: Bearer"; never written to files or logs
  double temperature = 0.0;
  bool keep_token_times = true;  // keep per-chunk times (needed for ITL)
  // The HTTP client when the runner makes its own transport (see make_transport).
  TransportKind transport = TransportKind::automatic;
  // The raw transport's read interval (RawOptions::read_interval_us); 0 reads on every arrival.
  uint32_t read_interval_us = k_default_read_interval_us;
  // A condition whose requests all ended sooner is sent again (workload::repeat_of, records
  // marked by `repeat`) until it has lasted this long; 0 = each request once.
  double min_condition_s = 0.0;

  static constexpr uint32_t k_default_read_interval_us = 0;
};

struct Progress {
  size_t condition_index = 0;  // 0-based
  size_t n_conditions = 0;
  std::string condition_id;
  uint64_t done = 0;   // requests of this condition that ended (ok, error or cancelled)
  uint64_t total = 0;  // its requests, repeats sent so far included
  uint64_t ok = 0;     // completed
  uint64_t errors = 0;
  uint64_t cancelled = 0;
  bool condition_done = false;  // the last call of a condition: every request of it has ended
  bool stopped = false;         // with condition_done: the run was stopped in this condition
};

struct RunResult {
  std::vector<ConditionStats> conditions;  // in run order; a stopped run has the partial one
  bool stopped = false;                    // the stop flag was raised
  double run_start_unix_s = 0;
  uint64_t max_in_flight = 0;   // the most requests that were in flight at once
  TransportCounters transport;  // reads over the whole run
};

class RequestRunner {
 public:
  // Runs over `transport`; a null one is replaced in run() by
  // make_transport(options.transport, options.endpoint).
  RequestRunner(RunOptions options, std::unique_ptr<Transport> transport);
  // Runs over make_transport(options.transport, options.endpoint), made in run().
  explicit RequestRunner(RunOptions options);
  ~RequestRunner();
  RequestRunner(const RequestRunner&) = delete;
  RequestRunner& operator=(const RequestRunner&) = delete;

  // Called when a condition starts (done == 0), after each request ends, and once more when the
  // condition ended (condition_done; with stopped when the run was stopped in it).
  void set_progress(std::function<void(const Progress&)> callback);
  // Called with each request's final record as it ends (e.g. TraceWriter::write). An error
  // returned from it stops the run and becomes run()'s error.
  void set_on_record(std::function<Expected<void>(const RequestRecord&)> callback);
  // Sets the run's wall-clock anchor before run() (so a trace file can be opened first);
  // returns it.
  double start_clock();

  // Runs `requests` (grouped into conditions by workload::conditions_of). When `should_stop`
  // (checked every few ms, e.g. sys::stop_requested) returns true: sends nothing more, cancels the
  // open streams (recorded as "cancelled") and returns with stopped = true. Returns a usage error
  // for a chat run with token-ID prompts, an io error from the record callback.
  Expected<RunResult> run(const std::vector<workload::RequestSpec>& requests,
                          const std::function<bool()>& should_stop = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// Checks that `options` can run `requests` (endpoint set, API fits the prompt format, timeouts
// positive, the raw transport only for http://); a usage error otherwise.
Expected<void> validate(const RunOptions& options,
                        const std::vector<workload::RequestSpec>& requests);

// The transport a run over `options` uses: make_transport(options.transport, options.endpoint)
// with options.read_interval_us; nullptr when it cannot be initialised.
std::unique_ptr<Transport> make_run_transport(const RunOptions& options);

// The request body for `request` under `options`.
std::string build_body(const workload::RequestSpec& request, const RunOptions& options);

}  // namespace kvprof::client
