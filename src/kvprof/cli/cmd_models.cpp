// `kvprof models [--search TEXT]`: lists the built-in model catalog.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/model/catalog.hpp"
#include "kvprof/report/text/table.hpp"

namespace kvprof::cli {

void register_models_command(CLI::App& app) {
  struct Options {
    std::string search;
    OutputOptions out;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("models", "List the built-in model catalog");
  cmd->add_option("-s,--search", opts->search, "Only models whose id, alias, family or tag match");
  add_output_options(cmd, opts->out);
  cmd->callback([opts] {
    const auto hits = model::search_catalog(opts->search);
    nlohmann::json json = {{"schema_version", 1}, {"models", nlohmann::json::array()}};
    report::text::Table table({"model", "family", "params", "aliases", "tags"});
    for (const auto* e : hits) {
      json["models"].push_back({{"id", e->id},
                                {"aliases", e->aliases},
                                {"family", e->family},
                                {"params_b", e->params_b},
                                {"tags", e->tags},
                                {"source", e->source}});
      table.add_row({e->id, e->family, e->params_b > 0 ? fmt::format("{:.1f}B", e->params_b) : "",
                     fmt::format("{}", fmt::join(e->aliases, ", ")),
                     fmt::format("{}", fmt::join(e->tags, ","))});
    }
    std::string text = table.render();
    text += fmt::format("{} model(s){}\n", hits.size(),
                        opts->search.empty() ? "" : fmt::format(" matching '{}'", opts->search));
    emit(opts->out, json, text);
  });
}

}  // namespace kvprof::cli
