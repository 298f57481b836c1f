// `kvprof parse-log FILE`: reads an engine's startup log (llama.cpp, vLLM, ...) and prints the
// memory it reported (per component and device, with line numbers) and the settings it printed.
#include <fmt/format.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/report/text/engine_log_report.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::cli {

void register_parse_log_command(CLI::App& app) {
  struct Options {
    std::string path;
    std::string engine = "auto";
    OutputOptions out;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "parse-log",
      "Read an engine's startup log: the memory it reported per component and device "
      "(confidence: reported by engine), its settings and model facts.\n"
      "Exit codes: 0 memory figures found (or, for TGI, whose log prints no sizes, its KV cache "
      "in tokens); 1 the file was read but no memory line was recognised (so a script never "
      "takes an empty report for a log that reported nothing); "
      "2 the file is missing or unreadable, or a bad flag.");
  cmd->add_option("file", opts->path,
                  "The log file (stdout/stderr of the engine as printed); - reads standard input")
      ->required()
      ->type_name("FILE");
  std::vector<std::string> engines = {"auto"};
  for (const auto name : engines::log_read_engine_names())
    engines.emplace_back(name);
  cmd->add_option("--engine", opts->engine, "Which engine wrote it; auto = detect from the lines")
      ->check(CLI::IsMember(engines))
      ->capture_default_str();
  add_output_options(cmd, opts->out);
  cmd->callback([opts] {
    const auto options = engines::log_parse_options(
        opts->engine == "auto" ? engines::Engine::unknown : *engines::find_engine(opts->engine));
    const auto log = value_or_fatal(enginelog::parse_engine_log_file(opts->path, options));
    emit(opts->out, report::text::engine_log_json(log), report::text::engine_log_text(log));
    const auto& kv = log.settings;
    const bool kv_in_tokens = kv.kv_cache_tokens || kv.num_gpu_blocks || kv.max_total_num_tokens;
    if (!enginelog::has_memory_figures(log) && !kv_in_tokens) {
      // Exit 1: the input was fine as a file but gave no figure, a runtime outcome.
      throw Fatal({ErrorKind::internal,
                   fmt::format("no memory lines recognised in '{}' ({} lines read, engine: {})",
                               opts->path, log.n_lines, engines::engine_name(log.engine))});
    }
  });
}

}  // namespace kvprof::cli
