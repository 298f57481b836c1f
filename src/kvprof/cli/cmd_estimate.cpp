// `kvprof estimate`: plan a deployment. Engine settings use the engines' own flag names so a
// user can paste what they run (vLLM: --tensor-parallel-size/-tp, --gpu-memory-utilization,
// --max-model-len, ...; SGLang's --mem-fraction-static; llama.cpp's -ngl/-c/-np).
#include <fmt/format.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/inverse.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/report/estimate_report.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {

void register_estimate_command(CLI::App& app) {
  struct State {
    EstimateOptions options;
    bool recommend = false;
    OutputOptions out;
  };
  auto o = std::make_shared<State>();
  auto* cmd = app.add_subcommand(
      "estimate",
      "Predict per-GPU memory (weights, KV cache, activations, CUDA graphs, overhead), what the "
      "engine will log, whether it fits, max concurrency and context; --recommend GPUs");
  add_estimate_options(cmd, o->options);
  cmd->add_flag("--recommend", o->recommend,
                "List catalog GPUs x counts x TP that fit, smallest first");
  add_output_options(cmd, o->out);
  cmd->callback([o] {
    const auto input = build_estimate_input(o->options);
    if (o->recommend) {
      const auto recs = estimate::recommend(input, 12);
      const uint64_t ctx =
          input.workload.context_tokens.empty()
              ? input.settings.max_model_len.value_or(input.model.max_position_embeddings)
              : input.workload.context_tokens.front();
      emit(o->out, report::recommendations_json(recs, ctx),
           report::recommendations_text(recs, ctx));
      if (recs.empty()) throw Fatal({ErrorKind::input, "no catalog GPU configuration fits"});
      return;
    }
    const auto est = value_or_fatal(estimate::estimate(input));
    emit(o->out, report::estimate_json(est), report::estimate_text(est));
  });
}

}  // namespace kvprof::cli
