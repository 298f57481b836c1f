// The adaptive search for the largest passing concurrency (see find_max.hpp).
#include "kvprof/experiment/find_max.hpp"
#include "kvprof/util/json_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace kvprof::experiment {

using nlohmann::json;

namespace {

json opt_count(const std::optional<uint64_t>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts)
    out += (out.empty() ? "" : "; ") + p;
  return out;
}

json outcome_json(const TrialOutcome& o) {
  return {{"concurrency", o.concurrency},
          {"n_requests", o.n_requests},
          {"n_ok", o.n_ok},
          {"n_errors", o.n_errors},
          {"first_error", o.first_error},
          {"preemptions", opt_json(o.preemptions)},
          {"queued_requests", o.queued_requests},
          {"peak_num_requests_running", opt_json(o.peak_running)},
          {"peak_num_requests_waiting", opt_json(o.peak_waiting)},
          {"peak_kv_cache_usage", opt_json(o.peak_kv_cache_usage)},
          {"ttft_p99_ms", opt_json(o.ttft_p99_ms)},
          {"itl_p99_ms", opt_json(o.itl_p99_ms)},
          {"memory_frac", opt_json(o.memory_frac)},
          {"num_gpu_blocks", o.num_gpu_blocks ? json(*o.num_gpu_blocks) : json(nullptr)},
          {"block_size_tokens", o.block_size_tokens ? json(*o.block_size_tokens) : json(nullptr)},
          {"kv_capacity_tokens", opt_count(o.kv_capacity_tokens)},
          {"run_dir", o.run_dir}};
}

}  // namespace

TrialVerdict judge_trial(const TrialOutcome& o, const FindMaxLimits& l) {
  std::vector<std::string> failed, ok;
  if (o.n_ok == 0 || o.n_errors > 0 || o.n_ok < o.n_requests) {
    failed.push_back(fmt::format("{} of {} requests failed{}", o.n_requests - o.n_ok, o.n_requests,
                                 o.first_error.empty() ? "" : " (" + o.first_error + ")"));
  }
  if (o.preemptions && *o.preemptions > 0) {
    failed.push_back(fmt::format("{:.0f} preemptions (the KV cache ran out)", *o.preemptions));
  }
  if (o.queued_requests > 0) {
    failed.push_back(
        fmt::format("{} of {} requests queued behind others", o.queued_requests, o.concurrency));
  } else if (o.peak_running && o.peak_waiting && *o.peak_waiting > 0 &&
             *o.peak_running < o.concurrency) {
    // The request timings can blur under load; the server's own gauges say it too.
    failed.push_back(fmt::format("the server ran at most {:.0f} of {} at once ({:.0f} waiting)",
                                 *o.peak_running, o.concurrency, *o.peak_waiting));
  }
  if (l.max_memory_frac && o.memory_frac) {
    if (*o.memory_frac > *l.max_memory_frac) {
      failed.push_back(
          fmt::format("memory {:.1f}% > {:.1f}%", *o.memory_frac * 100, *l.max_memory_frac * 100));
    } else {
      ok.push_back(
          fmt::format("memory {:.1f}% <= {:.1f}%", *o.memory_frac * 100, *l.max_memory_frac * 100));
    }
  }
  const auto slo = [&](const char* name, const std::optional<double>& limit,
                       const std::optional<double>& value) {
    if (!limit) return;
    if (!value) {
      failed.push_back(fmt::format("{} p99 not measured", name));
    } else if (*value > *limit) {
      failed.push_back(fmt::format("{} p99 {:.1f} ms > SLO {:.1f} ms", name, *value, *limit));
    } else {
      ok.push_back(fmt::format("{} p99 {:.1f} ms <= {:.1f} ms", name, *value, *limit));
    }
  };
  slo("TTFT", l.slo_ttft_ms, o.ttft_p99_ms);
  slo("ITL", l.slo_itl_ms, o.itl_p99_ms);
  if (!failed.empty()) return {false, join(failed)};
  std::vector<std::string> why{
      fmt::format("all {} requests ran at once, no errors", o.concurrency)};
  why.push_back(o.preemptions ? "no preemption" : "preemptions not reported");
  if (o.peak_kv_cache_usage)
    why.push_back(fmt::format("KV peak {:.1f}%", *o.peak_kv_cache_usage * 100));
  why.insert(why.end(), ok.begin(), ok.end());
  return {true, join(why)};
}

uint32_t find_max_step_bound(uint32_t min_concurrency, uint32_t max_concurrency) {
  const uint64_t range = uint64_t{max_concurrency} - min_concurrency + 1;
  return static_cast<uint32_t>(std::floor(std::log2(static_cast<double>(range)))) + 3;
}

Expected<FindMaxResult> find_max(const FindMaxLimits& limits, const Trial& trial,
                                 const std::function<void(const FindMaxStep&)>& on_step,
                                 const std::function<bool()>& should_stop) {
  if (limits.min_concurrency == 0 || limits.max_concurrency < limits.min_concurrency) {
    return fail(ErrorKind::usage,
                fmt::format("the concurrency range {}..{} is empty (the least is 1)",
                            limits.min_concurrency, limits.max_concurrency));
  }
  if (limits.input_len == 0 || limits.output_len == 0) {
    return fail(ErrorKind::usage, "--input-len and --output-len must be at least 1");
  }
  const auto t0 = std::chrono::steady_clock::now();
  FindMaxResult r;
  r.limits = limits;
  r.step_bound = find_max_step_bound(limits.min_concurrency, limits.max_concurrency);
  // Known: everything <= lo passes, everything >= hi fails.
  uint64_t lo = uint64_t{limits.min_concurrency} - 1;
  uint64_t hi = uint64_t{limits.max_concurrency} + 1;
  bool cut_short = false;  // a trial came back interrupted
  const auto run = [&](uint64_t c, const char* phase) -> Expected<bool> {
    FindMaxStep s;
    s.step = static_cast<uint32_t>(r.steps.size() + 1);
    s.phase = phase;
    const auto begin = std::chrono::steady_clock::now();
    auto o = trial(static_cast<uint32_t>(c), s.step);
    if (!o) return std::unexpected(o.error());
    s.outcome = std::move(*o);
    s.outcome.concurrency = static_cast<uint32_t>(c);
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (s.outcome.interrupted) {
      // Stopped before it ended: neither a pass nor a fail, and the search ends here.
      s.verdict = {false, "interrupted before the trial ended: not a result"};
      cut_short = true;
    } else {
      s.verdict = judge_trial(s.outcome, limits);
      if (s.verdict.pass) {
        lo = c;
      } else {
        hi = c;
      }
    }
    if (on_step) on_step(s);
    r.steps.push_back(std::move(s));
    return r.steps.back().verdict.pass;
  };
  const auto stopped = [&] { return cut_short || (should_stop && should_stop()); };
  if (limits.start) {
    const uint64_t c0 =
        std::clamp<uint64_t>(*limits.start, limits.min_concurrency, limits.max_concurrency);
    auto pass = run(c0, "start");
    if (!pass) return std::unexpected(pass.error());
    // One step of 25% past the estimate brackets the limit when the estimate is close.
    const uint64_t step = std::max<uint64_t>(1, (c0 + 3) / 4);
    const uint64_t c1 = *pass ? std::min(c0 + step, hi - 1) : (c0 > step ? c0 - step : 0);
    if (!stopped() && c1 > lo && c1 < hi) {
      auto again = run(c1, "bracket");
      if (!again) return std::unexpected(again.error());
    }
  }
  while (hi - lo > 1 && !stopped()) {
    auto pass = run(lo + (hi - lo) / 2, "bisect");
    if (!pass) return std::unexpected(pass.error());
  }
  r.interrupted = cut_short || hi - lo > 1;
  if (lo >= limits.min_concurrency) r.answer = static_cast<uint32_t>(lo);
  if (hi <= limits.max_concurrency) r.first_fail = static_cast<uint32_t>(hi);
  r.at_range_limit = lo == limits.max_concurrency;
  const FindMaxStep* at_answer = nullptr;
  const FindMaxStep* at_fail = nullptr;
  for (const auto& s : r.steps) {
    if (r.answer && s.outcome.concurrency == *r.answer) at_answer = &s;
    if (r.first_fail && s.outcome.concurrency == *r.first_fail) at_fail = &s;
  }
  const bool judged = std::any_of(r.steps.begin(), r.steps.end(),
                                  [](const FindMaxStep& s) { return !s.outcome.interrupted; });
  if (r.interrupted && !judged) {
    r.margin = "interrupted before any step ended: nothing is known yet";
  } else if (r.interrupted) {
    r.margin = fmt::format("interrupted: the limit lies in {}..{}", lo, hi);
  } else if (!r.answer) {
    r.margin = fmt::format("even {} fails: {}", limits.min_concurrency,
                           at_fail ? at_fail->verdict.why : "");
  } else if (r.at_range_limit) {
    r.margin = fmt::format("{} passes ({}); the limit may lie above --max-concurrency", *r.answer,
                           at_answer ? at_answer->verdict.why : "");
  } else {
    r.margin = fmt::format("{} passes ({}); {} fails ({})", *r.answer,
                           at_answer ? at_answer->verdict.why : "", *r.first_fail,
                           at_fail ? at_fail->verdict.why : "");
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

json find_max_json(const FindMaxResult& r) {
  const auto& l = r.limits;
  json steps = json::array();
  for (const auto& s : r.steps) {
    steps.push_back({{"step", s.step},
                     {"phase", s.phase},
                     {"concurrency", s.outcome.concurrency},
                     {"pass", s.verdict.pass},
                     {"interrupted", s.outcome.interrupted},
                     {"why", s.verdict.why},
                     {"wall_s", s.wall_s},
                     {"outcome", outcome_json(s.outcome)}});
  }
  // Schema 2: the answer is "max_concurrency" (schema 1 named it max_concurrency_found and
  // gave the plain name to the top of the range searched, now concurrency_range.max).
  return {{"schema_version", 2},
          {"max_concurrency", r.answer ? json(*r.answer) : json(nullptr)},
          {"input_len", l.input_len},
          {"output_len", l.output_len},
          {"slo_ttft_ms", opt_json(l.slo_ttft_ms)},
          {"slo_itl_ms", opt_json(l.slo_itl_ms)},
          {"max_memory_frac", opt_json(l.max_memory_frac)},
          {"concurrency_range", {{"min", l.min_concurrency}, {"max", l.max_concurrency}}},
          {"start", l.start ? json(*l.start) : json(nullptr)},
          {"start_source", l.start_source},
          {"first_failing_concurrency", r.first_fail ? json(*r.first_fail) : json(nullptr)},
          {"at_range_limit", r.at_range_limit},
          {"interrupted", r.interrupted},
          {"margin", r.margin},
          {"n_steps", r.steps.size()},
          {"step_bound", r.step_bound},
          {"grid_steps", l.max_concurrency - l.min_concurrency + 1},
          {"wall_s", r.wall_s},
          {"steps", steps}};
}

std::string find_max_step_text(const FindMaxStep& s) {
  return fmt::format("step {} ({}): concurrency {} {} in {:.1f} s: {}", s.step, s.phase,
                     s.outcome.concurrency,
                     s.outcome.interrupted ? "INTERRUPTED"
                     : s.verdict.pass      ? "PASS"
                                           : "FAIL",
                     s.wall_s, s.verdict.why);
}

std::string find_max_text(const FindMaxResult& r) {
  const auto& l = r.limits;
  std::string out;
  for (const auto& s : r.steps)
    out += find_max_step_text(s) + "\n";
  out += fmt::format("\nmax concurrency at {} input + {} output tokens: {}\n", l.input_len,
                     l.output_len, r.answer ? std::to_string(*r.answer) : "none");
  out += "margin: " + r.margin + "\n";
  out += fmt::format(
      "{} steps (bound {} for {}..{}; a grid over the range takes {}), {:.1f} s; started at {} "
      "({})\n",
      r.steps.size(), r.step_bound, l.min_concurrency, l.max_concurrency,
      l.max_concurrency - l.min_concurrency + 1, r.wall_s,
      l.start ? std::to_string(*l.start) : "the middle of the range",
      l.start_source.empty() ? "no estimate" : l.start_source);
  return out;
}

}  // namespace kvprof::experiment
