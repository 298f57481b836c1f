// The workload grid's command-line options.
#include "kvprof/workload/cli_options.hpp"

#include <fmt/format.h>

#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::workload {

namespace {

Expected<std::vector<uint32_t>> parse_counts(const std::vector<std::string>& texts,
                                             std::string_view what) {
  std::vector<uint32_t> out;
  for (const auto& item : texts) {
    for (const auto& field : split(item, ',')) {  // env values arrive unsplit
      const std::string t = trim(field);
      if (t.empty()) continue;
      auto v = parse_count(t);
      if (!v || *v == 0 || *v > UINT32_MAX) {
        return fail(ErrorKind::usage, fmt::format("{}: '{}' is not a positive count", what, t));
      }
      out.push_back(static_cast<uint32_t>(*v));
    }
  }
  return out;
}

}  // namespace

void add_grid_options(CLI::App* cmd, GridCliValues& v) {
  cmd->add_option("--input-lens", v.input_lens, "Prompt lengths in tokens (e.g. 8k,16k,32k)")
      ->delimiter(',')
      ->envname("KVPROF_INPUT_LENS")
      ->capture_default_str();
  cmd->add_option("--output-lens", v.output_lens, "Output lengths in tokens")
      ->delimiter(',')
      ->envname("KVPROF_OUTPUT_LENS")
      ->capture_default_str();
  cmd->add_option("--concurrencies", v.concurrencies, "Requests in flight per condition")
      ->delimiter(',')
      ->envname("KVPROF_CONCURRENCIES")
      ->capture_default_str();
  cmd->add_option("--prefix-modes", v.prefix_modes,
                  "Prefix reuse: low (none) and/or high (a shared prefix of --prefix-fraction)")
      ->delimiter(',')
      ->envname("KVPROF_PREFIX_MODES")
      ->capture_default_str();
  cmd->add_option("--n-per-condition", v.n_per_condition,
                  "Requests per condition: N x concurrency (see --count-mode)")
      ->envname("KVPROF_N_PER_CONDITION")
      ->check(CLI::Range(1u, 1'000'000u))
      ->capture_default_str();
  cmd->add_option("--count-mode", v.count_mode,
                  "times-concurrency: N x concurrency requests per condition, so the "
                  "concurrency is reached and held; exact: N requests per condition, whatever the "
                  "concurrency")
      ->check(CLI::IsMember({"times-concurrency", "exact"}))
      ->capture_default_str();
  cmd->add_option("--seed", v.seed, "Seed for prompts and arrivals (same seed, same workload)")
      ->envname("KVPROF_SEED")
      ->capture_default_str();
  cmd->add_option("--request-rate", v.request_rate,
                  "Open loop: Poisson arrivals at R requests/s per condition (0 = closed loop)")
      ->envname("KVPROF_REQUEST_RATE")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--prompt-format", v.prompt_format,
                  "tokens: exact token-ID prompts; text: words of about one token each")
      ->check(CLI::IsMember({"tokens", "text"}))
      ->capture_default_str();
  cmd->add_option("--prefix-fraction", v.prefix_fraction,
                  "Share of the prompt that is shared in high prefix mode")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
}

Expected<GridOptions> resolve(const GridCliValues& v) {
  GridOptions o;
  auto in = parse_counts(v.input_lens, "--input-lens");
  if (!in) return std::unexpected(in.error());
  auto out = parse_counts(v.output_lens, "--output-lens");
  if (!out) return std::unexpected(out.error());
  auto conc = parse_counts(v.concurrencies, "--concurrencies");
  if (!conc) return std::unexpected(conc.error());
  o.input_lens = *in;
  o.output_lens = *out;
  o.concurrencies = *conc;
  o.prefix_modes.clear();
  for (const auto& item : v.prefix_modes) {
    for (const auto& field : split(item, ',')) {
      const std::string t = trim(field);
      if (t.empty()) continue;
      auto mode = parse_prefix_mode(to_lower(t));
      if (!mode) return fail(ErrorKind::usage, "--prefix-modes: " + mode.error().message);
      o.prefix_modes.push_back(*mode);
    }
  }
  o.n_per_condition = v.n_per_condition;
  auto count_mode = parse_count_mode(v.count_mode);
  if (!count_mode) return fail(ErrorKind::usage, count_mode.error().message);
  o.count_mode = *count_mode;
  o.seed = v.seed;
  o.request_rate = v.request_rate;
  auto format = parse_prompt_format(v.prompt_format);
  if (!format) return fail(ErrorKind::usage, format.error().message);
  o.prompt_format = *format;
  o.prefix_fraction = v.prefix_fraction;
  if (auto ok = validate(o); !ok) return std::unexpected(ok.error());
  return o;
}

}  // namespace kvprof::workload
