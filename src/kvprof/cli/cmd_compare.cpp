// `kvprof compare RUN_A RUN_B [...]`: runs side by side against the first — settings that differ,
// memory per component and per GPU with the difference and % change, latency and throughput, the
// CUDA graph overhead — with the estimate's prediction of the same difference.
#include <fmt/format.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/experiment/compare.hpp"
#include "kvprof/results/run_folder.hpp"

namespace kvprof::cli {

namespace {

struct CompareState {
  std::vector<std::string> runs;
  std::string results_dir = "results";
  std::vector<std::string> estimate_with;
  OutputOptions out;
};

// The plan of `flags` for `run`: the model and GPU default to the run's.
experiment::PlanFigures plan_for(const results::RunSummary& run, const std::string& flags) {
  EstimateOptions defaults;
  if (!run.model.empty()) defaults.model = run.model;
  auto input = value_or_fatal(parse_estimate_flags(flags, defaults));
  auto est = engines::plan(input);
  if (!est) throw Fatal(est.error().with_context(fmt::format("--estimate-with for {}", run.id)));
  return experiment::plan_figures(*est, flags);
}

void run_compare(const CompareState& st) {
  if (st.runs.size() < 2) throw Fatal({ErrorKind::usage, "compare needs at least two runs"});
  if (!st.estimate_with.empty() && st.estimate_with.size() != st.runs.size()) {
    throw Fatal(
        {ErrorKind::usage, fmt::format("--estimate-with: give one per run ({} runs, {} given)",
                                       st.runs.size(), st.estimate_with.size())});
  }
  std::vector<results::RunSummary> runs;
  for (const auto& r : st.runs)
    runs.push_back(value_or_fatal(results::load_run(r, st.results_dir)));
  std::vector<experiment::PlanFigures> plans;
  for (size_t i = 0; i < st.estimate_with.size(); ++i)
    plans.push_back(plan_for(runs[i], st.estimate_with[i]));
  const auto c = experiment::compare_runs(std::move(runs), plans);
  emit(st.out, experiment::comparison_json(c), experiment::comparison_text(c));
}

}  // namespace

void register_compare_command(CLI::App& app) {
  auto st = std::make_shared<CompareState>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Compare runs (profile or bench run folders, or run ids under --results-dir) against the "
      "first: settings that differ, memory per component and per GPU with the difference and % "
      "change, latency and throughput, extra CUDA graphs and their memory, and the estimate's "
      "prediction of the same difference");
  cmd->add_option("runs", st->runs,
                  "Run folders, run ids of the history under --results-dir, or `latest`; the "
                  "first is the reference")
      ->required();
  cmd->add_option("--results-dir", st->results_dir, "Where run ids are looked up")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--estimate-with", st->estimate_with,
                  "Engine flags of each run's plan, once per run in order, e.g. \"--model X "
                  "--gpu H100\" \"--model X --gpu H100 --enforce-eager\" (default: the estimate "
                  "each run recorded)");
  add_output_options(cmd, st->out);
  cmd->callback([st] { run_compare(*st); });
}

}  // namespace kvprof::cli
