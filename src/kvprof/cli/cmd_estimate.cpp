// `kvprof estimate`: plan a deployment. Engine settings use the engines' own flag names so a
// user can paste what they run (vLLM: --tensor-parallel-size/-tp, --gpu-memory-utilization,
// --max-model-len, ...; SGLang's --mem-fraction-static; llama.cpp's -ngl/-c/-np).
#include <fmt/format.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/engines/assumptions.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/inverse.hpp"
#include "kvprof/experiment/compare.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/report/html/plan_figure.hpp"
#include "kvprof/report/text/estimate_report.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {

void register_estimate_command(CLI::App& app) {
  struct State {
    EstimateOptions options;
    bool recommend = false;
    bool all = false;
    std::vector<std::string> compare;
    std::string plot_path;
    OutputOptions out;
  };
  auto o = std::make_shared<State>();
  auto* cmd = app.add_subcommand(
      "estimate",
      "Predict per-GPU memory (weights, KV cache, activations, CUDA graphs, overhead), what the "
      "engine will log, whether it fits, max concurrency and context; --recommend GPUs.\n"
      "Exit codes: 0 it fits (or is tight, queues or rejects some requests); 4 it does not start "
      "or runs out of memory (the plan is still printed); 2 a bad flag or model.");
  add_estimate_options(cmd, o->options);
  cmd->add_flag("--recommend", o->recommend,
                "List every catalog GPU that fits on the fewest GPUs (1, 2, 4, 8, or 16 as two "
                "nodes: TP within a node, PP across), fewest GPUs then least memory first, with "
                "the engine flags to paste");
  cmd->add_flag("--all", o->all, "With --recommend: show every fit (the table shows 12)");
  cmd->add_option("--compare", o->compare,
                  "Two plans and their difference: \"FLAGS A\" \"FLAGS B\", each on top of the "
                  "other options, e.g. --compare \"\" \"--enforce-eager\" or \"--max-num-seqs 64\" "
                  "\"--max-num-seqs 256\"");
  cmd->add_option("--plot", o->plot_path,
                  "Also draw the plan into FILE (.png or .svg): memory vs concurrency and vs "
                  "context length, with the capacity and where it runs out");
  add_output_options(cmd, o->out);
  cmd->callback([o, cmd] {
    const bool want_plot = !o->plot_path.empty();
    const auto plot_format = want_plot ? value_or_fatal(report::html::plot_format_of(o->plot_path))
                                       : report::html::ImageFormat::png;
    if (want_plot && (o->recommend || !o->compare.empty()))
      throw Fatal({ErrorKind::usage, "--plot draws one plan: not with --recommend or --compare"});
    if (!o->compare.empty()) {
      if (o->compare.size() != 2) {
        throw Fatal(
            {ErrorKind::usage, "--compare takes two flag strings: \"FLAGS A\" \"FLAGS B\""});
      }
      std::vector<experiment::PlanFigures> plans;
      for (const auto& flags : o->compare) {
        auto input = value_or_fatal(parse_estimate_flags(flags, o->options));
        plans.push_back(experiment::plan_figures(value_or_fatal(engines::plan(input)), flags));
      }
      emit(o->out, experiment::plan_comparison_json(plans[0], plans[1]),
           experiment::plan_comparison_text(plans[0], plans[1]));
      return;
    }
    const auto input = build_estimate_input(o->options);
    if (o->recommend) {
      const auto recs = estimate::recommend(input, &engines::plan);
      const uint64_t ctx =
          input.workload.context_tokens.empty()
              ? input.settings.max_model_len.value_or(input.model.max_position_embeddings)
              : input.workload.context_tokens.front();
      emit(o->out, report::text::recommendations_json(recs, ctx),
           report::text::recommendations_text(recs, ctx, o->all ? 0 : 12));
      if (recs.empty()) throw Fatal({ErrorKind::input, "no catalog GPU configuration fits"});
      return;
    }
    const auto est = value_or_fatal(engines::plan(input));
    engines::AssumptionSources sources;
    sources.given = flags_given(*cmd);
    sources.gpu_origin = sources.given.contains("gpu") || sources.given.contains("gpu-mem")
                             ? engines::GpuOrigin::given
                             : engines::GpuOrigin::assumed;
    if (sources.gpu_origin == engines::GpuOrigin::assumed) sources.gpu_note = "no --gpu given";
    const auto assumptions = engines::estimate_assumptions(est, sources);
    auto doc = report::text::estimate_json(est);
    doc["assumptions"] = assumptions;
    emit(o->out, doc, report::text::estimate_text(est) + engines::assumptions_text(assumptions));
    if (want_plot) {
      value_or_fatal(report::html::write_plan_figure(
          est, report::html::plan_point(est, input.workload), o->plot_path, plot_format));
      fmt::print(o->out.json ? stderr : stdout, "plot: {}\n", o->plot_path);
    }
    // A script can gate on the answer: exit 4 when the deployment would not run.
    if (est.verdict == estimate::Verdict::does_not_start || est.verdict == estimate::Verdict::oom) {
      throw Fatal({ErrorKind::check_failed,
                   fmt::format("the plan does not fit: {}", estimate::verdict_text(est.verdict))});
    }
  });
}

}  // namespace kvprof::cli
