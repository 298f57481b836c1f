// "Did you mean" for unknown flags (see suggest.hpp).
#include "kvprof/cli/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "kvprof/util/strings.hpp"

namespace kvprof::cli {

std::optional<std::string> closest_flag(const CLI::App& cmd, std::string_view unknown) {
  if (!unknown.starts_with("-") || unknown.size() > 200) return std::nullopt;
  const std::string_view name = unknown.substr(0, unknown.find('='));
  if (name.size() < 4) return std::nullopt;  // -x: too short to guess
  std::optional<std::string> best;
  size_t best_distance = 0;
  const auto consider = [&](const std::string& flag) {
    const size_t d = edit_distance(name, flag);
    if (!best || d < best_distance) {
      best = flag;
      best_distance = d;
    }
  };
  const std::function<void(const CLI::App&)> visit = [&](const CLI::App& app) {
    for (const CLI::Option* opt : app.get_options()) {
      for (const auto& l : opt->get_lnames())
        consider("--" + l);
      for (const auto& s : opt->get_snames())
        consider("-" + s);
    }
    // Option groups are nameless subcommands holding their own options.
    for (const CLI::App* group :
         app.get_subcommands([](const CLI::App* a) { return a->get_name().empty(); })) {
      visit(*group);
    }
  };
  visit(cmd);
  const size_t limit = std::min<size_t>(4, std::max<size_t>(1, name.size() / 3));
  if (!best || best_distance == 0 || best_distance > limit) return std::nullopt;
  return best;
}

const CLI::App& selected_command(const CLI::App& app) {
  const CLI::App* cur = &app;
  for (;;) {
    const auto subs = cur->get_subcommands();
    if (subs.empty()) return *cur;
    cur = subs.front();
  }
}

std::string unexpected_arguments_text(const CLI::App& cmd) {
  std::string unknown, others;
  bool after_unknown_flag = false;
  for (const auto& arg : cmd.remaining()) {
    const bool is_flag = arg.starts_with("-") && arg.size() > 1;
    // The value typed after an unknown flag is that flag's, not an argument of its own.
    if (!is_flag && std::exchange(after_unknown_flag, false)) continue;
    if (is_flag) {
      after_unknown_flag = arg.find('=') == std::string::npos;
      const auto near = closest_flag(cmd, arg);
      unknown += fmt::format("{}{}{}", unknown.empty() ? "" : ", ", arg.substr(0, 200),
                             near ? fmt::format(" (did you mean {}?)", *near) : "");
    } else {
      others += fmt::format("{}'{}'", others.empty() ? "" : ", ", arg.substr(0, 200));
    }
  }
  std::string out;
  if (!unknown.empty()) out = "unknown flag " + unknown;
  if (!others.empty())
    out += fmt::format("{}unexpected argument {}", out.empty() ? "" : "; ", others);
  return out;
}

}  // namespace kvprof::cli
