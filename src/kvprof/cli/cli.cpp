// Top-level command line: subcommands, exit codes, the one place Fatal is caught.
#include "kvprof/cli/cli.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/suggest.hpp"
#include "kvprof/sys/open_files.hpp"
#include "kvprof/util/error.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::cli {
int run(int argc, char** argv) {
  // A file over the size limit fails its write (EFBIG) like a full disk, instead of killing us.
  std::signal(SIGXFSZ, SIG_IGN);
  // One socket per request in flight: the usual soft limit of 1,024 files would fail a large grid.
  sys::raise_open_file_limit();
  CLI::App app{
      "kvprof: plan and measure the GPU memory of LLM serving deployments.\n"
      "  estimate   predict weights, KV cache, activations, CUDA graphs per GPU\n"
      "  models     list the built-in model catalog\n"
      "  gpus       list the built-in GPU catalog\n"
      "  serve-sim  run a SIMULATED OpenAI-compatible vLLM server on loopback (tests, demos)\n"
      "  serve      serve a GGUF with llama.cpp in-process: OpenAI API, /slots, /metrics\n"
      "  env        show this machine: OS, CPU, RAM, GPUs (NVML), inference engines\n"
      "  sample     record GPU (and host) memory over time into CSV traces\n"
      "  workload   generate workload.jsonl: the grid of request conditions\n"
      "  requests   stream workload.jsonl to a server; request_trace.csv, TTFT/ITL/E2E\n"
      "  profile    measure a live server (or the built-in simulator): memory, /metrics, latency\n"
      "  bench      run llama.cpp in-process on a GGUF: memory and speed per concurrency\n"
      "  make-gguf  write a GGUF with random weights that llama.cpp loads (memory tests)\n"
      "  parse-log  read an engine's startup log: the memory it reported, per device and line\n"
      "  sweep      profile every configuration of a batch-profiling YAML file (resumable)\n"
      "  runs       list the history of a results folder: runs, benches, sweeps\n"
      "  report     report.html and PNG/SVG figures of run folders (profile, bench)\n"
      "  compare    runs side by side: settings, memory per component and GPU, latency, graphs\n"
      "  validate   a run's measured memory against an estimate or a calculator, per component\n"
      "  find-max   the largest concurrency that fits and meets the SLOs, found adaptively",
      "kvprof"};
  app.set_version_flag("--version", std::string("kvprof ") + KVPROF_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  register_estimate_command(app);
  register_models_command(app);
  register_gpus_command(app);
  register_env_command(app);
  register_serve_sim_command(app);
  register_serve_command(app);
  register_sample_command(app);
  register_workload_command(app);
  register_requests_command(app);
  register_profile_command(app);
  register_bench_command(app);
  register_make_gguf_command(app);
  register_parse_log_command(app);
  register_sweep_command(app);
  register_runs_command(app);
  register_report_command(app);
  register_compare_command(app);
  register_validate_command(app);
  register_find_max_command(app);

  // A mistyped command: named, with the closest one (CLI11 would only say one is required).
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub :
         std::as_const(app).get_subcommands([](const CLI::App*) { return true; }))
      names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      const auto close = closest_matches(argv[1], names, 1);
      std::fprintf(stderr,
                   "kvprof: error: unknown command '%s'%s\nRun kvprof --help for the commands.\n",
                   one_line(argv[1], 80).c_str(),
                   close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0]).c_str());
      return 2;
    }
  }
  try {
    auto args =
        normalize_short_flags(attach_flag_strings(std::vector<std::string>(argv, argv + argc)));
    std::vector<char*> raw;
    for (auto& a : args)
      raw.push_back(a.data());
    app.parse(static_cast<int>(raw.size()), raw.data());
  } catch (const CLI::ExtrasError& e) {
    const CLI::App& cmd = selected_command(app);
    std::string text = unexpected_arguments_text(cmd);
    if (text.empty()) text = e.what();
    std::fprintf(stderr, "kvprof %s: error: %s\nRun with --help for more information.\n",
                 cmd.get_name().empty() ? "" : cmd.get_name().c_str(), text.c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const Fatal& e) {
    // A URL's password or a key named in a message is never printed.
    std::fprintf(stderr, "kvprof: error: %s\n", redact_secrets(e.error().message).c_str());
    return exit_code_for(e.error().kind);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvprof: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace kvprof::cli
