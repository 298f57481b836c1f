// `kvprof requests`: runs workload.jsonl against an OpenAI-compatible server, writes
// request_trace.csv and prints per-condition throughput and latency.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/client/cli_options.hpp"
#include "kvprof/client/runner.hpp"
#include "kvprof/client/trace_writer.hpp"
#include "kvprof/profile/grid_progress.hpp"
#include "kvprof/report/text/progress_line.hpp"
#include "kvprof/report/text/table.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/workload/workload_io.hpp"

namespace kvprof::cli {

namespace {

std::string summary_table(const client::RunResult& result) {
  report::text::Table table({"condition", "conc", "ok/sent", "errors", "req/s", "out tok/s",
                             "TTFT p50/p99 ms", "ITL p50/p99 ms", "E2E p50/p99 ms"});
  for (const auto& s : result.conditions) {
    std::string errors;
    for (const auto& [kind, n] : s.errors_by_kind) {
      errors += fmt::format("{}{} {}", errors.empty() ? "" : ", ", n, kind);
    }
    if (s.n_cancelled > 0) {
      errors += fmt::format("{}{} cancelled", errors.empty() ? "" : ", ", s.n_cancelled);
    }
    table.add_row({s.condition_id, std::to_string(s.concurrency),
                   fmt::format("{}/{}", s.n_ok, s.n_requests), errors.empty() ? "-" : errors,
                   fmt::format("{:.2f}", s.request_throughput_per_s),
                   fmt::format("{:.1f}", s.output_tokens_per_s),
                   fmt::format("{:.0f}/{:.0f}", s.ttft_ms.p50, s.ttft_ms.p99),
                   fmt::format("{:.1f}/{:.1f}", s.itl_ms.p50, s.itl_ms.p99),
                   fmt::format("{:.0f}/{:.0f}", s.e2e_ms.p50, s.e2e_ms.p99)});
  }
  return table.render();
}

}  // namespace

void register_requests_command(CLI::App& app) {
  struct State {
    std::string workload_path;
    std::string trace_path = "request_trace.csv";
    client::RunCliValues run;
    bool json = false;
    bool quiet = false;
    bool no_color = false;
  };
  auto st = std::make_shared<State>();
  auto* cmd = app.add_subcommand(
      "requests",
      "Send workload.jsonl to an OpenAI-compatible server (streaming), write request_trace.csv\n"
      "(one row per request, latencies from the intended send time) and print per-condition\n"
      "throughput, TTFT, ITL and E2E");
  cmd->add_option("workload", st->workload_path, "workload.jsonl from `kvprof workload`")
      ->required()
      ->type_name("FILE");
  cmd->add_option("-o,--output", st->trace_path, "Where to write the per-request trace (CSV)")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_flag("--json", st->json, "Print the per-condition summary as JSON");
  cmd->add_flag("-q,--quiet", st->quiet, "No progress on stderr");
  cmd->add_flag("--no-color", st->no_color, "No colour in the progress (also: NO_COLOR=1)");
  client::add_run_options(cmd, st->run);
  cmd->callback([st] {
    const auto options = value_or_fatal(client::resolve(st->run));
    const auto requests = value_or_fatal(workload::read_workload(st->workload_path));
    if (auto ok = client::validate(options, requests); !ok) throw Fatal(ok.error());
    auto transport = client::make_run_transport(options);
    if (!transport) throw Fatal({ErrorKind::internal, "libcurl could not be initialised"});
    client::RequestRunner runner(options, std::move(transport));
    auto trace = value_or_fatal(client::TraceWriter::open(st->trace_path, runner.start_clock()));
    runner.set_on_record([&trace](const client::RequestRecord& r) { return trace.write(r); });
    // Progress as `profile` shows it: a status per request with the ETA, a line per condition.
    std::unique_ptr<report::text::ProgressLine> progress;
    const auto now_ns = [] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    profile::GridProgress grid(requests.size(), now_ns());
    int64_t condition_start_ns = now_ns();
    if (!st->quiet) {
      progress = report::text::stderr_progress(st->no_color);
      runner.set_progress([&](const client::Progress& p) {
        grid.update(p, now_ns());
        if (p.done == 0 && !p.condition_done) condition_start_ns = now_ns();
        if (!p.condition_done) {
          progress->status(grid.status_text(p));
          return;
        }
        const std::string line =
            grid.end_text(p, static_cast<double>(now_ns() - condition_start_ns) / 1e9, "", "");
        progress->line(line, report::text::tone_of(line));
      });
    }
    sys::install_stop_handlers();
    const auto result = value_or_fatal(runner.run(requests, [] { return sys::stop_requested(); }));
    progress.reset();  // the status line ends before the table

    nlohmann::json json = {{"schema_version", 1},
                           {"workload", st->workload_path},
                           {"trace", st->trace_path},
                           {"stopped", result.stopped},
                           {"max_in_flight", result.max_in_flight},
                           {"conditions", nlohmann::json::array()}};
    uint64_t n_ok = 0, n_mismatch = 0;
    for (const auto& s : result.conditions) {
      json["conditions"].push_back(client::to_json(s));
      n_ok += s.n_ok;
      n_mismatch += s.n_token_mismatches;
    }
    std::string text = summary_table(result);
    if (n_mismatch > 0) {
      text += fmt::format(
          "warning: {} requests got a different token count than asked (see the warning column "
          "of {})\n",
          n_mismatch, st->trace_path);
    }
    text += fmt::format("trace: {}\n", st->trace_path);
    emit(OutputOptions{st->json, ""}, json, text);
    if (result.stopped) throw Fatal({ErrorKind::interrupted, "stopped; open requests cancelled"});
    if (n_ok == 0) throw Fatal({ErrorKind::network, "no request succeeded"});
  });
}

}  // namespace kvprof::cli
