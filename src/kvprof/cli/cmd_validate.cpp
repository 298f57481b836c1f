// `kvprof validate RUN`: measured (sampled and engine-reported) vs kvprof's estimate for the
// same settings, or another calculator's figures (--calc-* GiB), per component with the error,
// the expected-accuracy band and a one-line diagnosis of the largest gap.
#include <fmt/format.h>

#include <optional>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/experiment/compare.hpp"
#include "kvprof/experiment/validate.hpp"
#include "kvprof/results/run_folder.hpp"

namespace kvprof::cli {

namespace {

constexpr double k_gib_f = 1024.0 * 1024.0 * 1024.0;

struct ValidateState {
  std::string run;
  std::string results_dir = "results";
  std::string estimate_with;
  std::optional<double> calc_weights_gib, calc_kv_gib, calc_activations_gib, calc_overhead_gib;
  OutputOptions out;
};

void run_validate(const ValidateState& st) {
  const auto run = value_or_fatal(results::load_run(st.run, st.results_dir));
  std::map<std::string, double> reference;
  std::string name;
  const std::pair<const char*, const std::optional<double>*> calc[] = {
      {"weights", &st.calc_weights_gib},
      {"kv_cache", &st.calc_kv_gib},
      {"activations", &st.calc_activations_gib},
      {"overhead", &st.calc_overhead_gib}};
  bool any_calc = false, all_calc = true;
  double calc_total = 0;
  for (const auto& [component, gib] : calc) {
    if (!*gib) {
      all_calc = false;
      continue;
    }
    if (!(**gib >= 0) || **gib > 1e6) {
      throw Fatal({ErrorKind::usage, fmt::format("--calc-*: {} is not a size in GiB", **gib)});
    }
    any_calc = true;
    reference[component] = **gib * k_gib_f;
    calc_total += **gib * k_gib_f;
  }
  if (any_calc) {
    if (!st.estimate_with.empty()) {
      throw Fatal({ErrorKind::usage, "give --calc-* figures or --estimate-with, not both"});
    }
    if (all_calc) reference["total"] = calc_total;
    name = "calculator figures";
  } else if (!st.estimate_with.empty()) {
    EstimateOptions defaults;
    if (!run.model.empty()) defaults.model = run.model;
    auto input = value_or_fatal(parse_estimate_flags(st.estimate_with, defaults));
    auto est = value_or_fatal(engines::plan(input));
    reference = experiment::plan_figures(est, st.estimate_with).components;
    name = fmt::format("kvprof estimate ({})", st.estimate_with);
  } else if (!run.estimated.empty()) {
    reference = run.estimated;
    name = fmt::format("the estimate the run recorded ({})",
                       run.estimate_flags.empty() ? "its settings" : run.estimate_flags);
  } else {
    throw Fatal({ErrorKind::usage,
                 fmt::format("{} recorded no estimate: give --estimate-with \"FLAGS\" or the "
                             "--calc-* figures of another calculator",
                             run.id)});
  }
  const auto v = experiment::validate_run(run, reference, name);
  emit(st.out, experiment::validation_json(v), experiment::validation_text(v));
  // A script can gate on the answer: exit 4 when a component lies outside its band.
  std::string outside;
  for (const auto& row : v.rows) {
    if (row.within_band && !*row.within_band) {
      outside += fmt::format("{}{} ({:+.1f}%)", outside.empty() ? "" : ", ", row.component,
                             row.error_pct.value_or(0));
    }
  }
  if (!outside.empty()) {
    throw Fatal(
        {ErrorKind::check_failed, fmt::format("outside the expected accuracy: {}", outside)});
  }
}

}  // namespace

void register_validate_command(CLI::App& app) {
  auto st = std::make_shared<ValidateState>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Check a run's measured memory (sampled and engine-reported) against kvprof's estimate for "
      "the same settings, or another calculator's figures, per component: error in %, the "
      "expected-accuracy band, and a diagnosis of the largest gap.\n"
      "Exit codes: 0 every component compared lies within its band; 4 one or more lie outside "
      "(the table is still printed); 2 a bad flag or run.");
  cmd->add_option("run", st->run,
                  "Run folder, run id of the history under --results-dir, or `latest`")
      ->required();
  cmd->add_option("--results-dir", st->results_dir, "Where run ids are looked up")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--estimate-with", st->estimate_with,
                  "Engine flags of the plan to check against, e.g. \"--model X --gpu H100 "
                  "--max-num-seqs 64\" (default: the estimate the run recorded)");
  auto* calc = cmd->add_option_group("another calculator's figures (GiB per GPU)");
  calc->add_option("--calc-weights", st->calc_weights_gib, "Model weights, GiB");
  calc->add_option("--calc-kv", st->calc_kv_gib, "KV cache, GiB");
  calc->add_option("--calc-activations", st->calc_activations_gib, "Activations, GiB");
  calc->add_option("--calc-overhead", st->calc_overhead_gib, "Framework overhead, GiB");
  add_output_options(cmd, st->out);
  cmd->callback([st] { run_validate(*st); });
}

}  // namespace kvprof::cli
