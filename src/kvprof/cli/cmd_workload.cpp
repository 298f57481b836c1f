// `kvprof workload`: generates workload.jsonl, the grid of request conditions.
#include <fmt/format.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/workload/cli_options.hpp"
#include "kvprof/workload/workload_io.hpp"

namespace kvprof::cli {

void register_workload_command(CLI::App& app) {
  struct State {
    workload::GridCliValues grid;
    std::string path = "workload.jsonl";
    bool json = false;
    bool inline_prompts = false;
  };
  auto st = std::make_shared<State>();
  auto* cmd = app.add_subcommand(
      "workload",
      "Generate workload.jsonl: input lengths x output lengths x concurrencies x prefix modes,\n"
      "each condition with N x concurrency requests (--count-mode), deterministic under --seed");
  cmd->add_option("-o,--output", st->path, "Where to write the workload (JSON lines)")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_flag("--json", st->json, "Print the summary as JSON");
  cmd->add_flag("--inline-prompts", st->inline_prompts,
                "Write every prompt into its line (for other tools; large: the default grid "
                "makes 157 MB) instead of the generator's settings and a SHA-256 per prompt");
  workload::add_grid_options(cmd, st->grid);
  cmd->callback([st] {
    const auto grid = value_or_fatal(workload::resolve(st->grid));
    const auto requests = value_or_fatal(workload::generate(grid));
    if (auto ok = st->inline_prompts ? workload::write_workload(st->path, requests)
                                     : workload::write_generated_workload(st->path, grid, requests);
        !ok) {
      throw Fatal(ok.error());
    }
    const auto size = workload::grid_size(grid);
    nlohmann::json json = {
        {"schema_version", 1},
        {"path", st->path},
        {"n_conditions", size.n_conditions},
        {"n_requests", size.n_requests},
        {"n_prompt_tokens", size.n_prompt_tokens},
        {"seed", grid.seed},
        {"prompts", st->inline_prompts ? "inline" : "generated"},
        {"generator_path", st->inline_prompts
                               ? nlohmann::json(nullptr)
                               : nlohmann::json(workload::generator_path(st->path).string())},
        {"count_mode", workload::count_mode_name(grid.count_mode)},
        {"arrival", grid.request_rate > 0 ? "poisson" : "closed"},
        {"request_rate", grid.request_rate},
        {"prompt_format", workload::prompt_format_name(grid.prompt_format)}};
    std::string text = fmt::format(
        "wrote {}: {} conditions, {} requests, {} prompt tokens ({} arrivals{}, {} prompts, "
        "seed {})\n",
        st->path, size.n_conditions, size.n_requests, size.n_prompt_tokens,
        grid.request_rate > 0 ? "poisson" : "closed-loop",
        grid.request_rate > 0 ? fmt::format(" at {} req/s", grid.request_rate) : "",
        workload::prompt_format_name(grid.prompt_format), grid.seed);
    if (!st->inline_prompts) {
      text += fmt::format("wrote {}: the generator of its prompts (keep it beside it)\n",
                          workload::generator_path(st->path).string());
    }
    emit(OutputOptions{st->json, ""}, json, text);
  });
}

}  // namespace kvprof::cli
