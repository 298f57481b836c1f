// One function per subcommand, each in its own cmd_<name>.cpp, called once by cli::run().
#pragma once

#include <CLI/CLI.hpp>

namespace kvprof::cli {

void register_estimate_command(CLI::App& app);
void register_models_command(CLI::App& app);
void register_gpus_command(CLI::App& app);
void register_env_command(CLI::App& app);
void register_serve_sim_command(CLI::App& app);
void register_serve_command(CLI::App& app);
void register_sample_command(CLI::App& app);
void register_workload_command(CLI::App& app);
void register_requests_command(CLI::App& app);
void register_profile_command(CLI::App& app);
void register_bench_command(CLI::App& app);
void register_make_gguf_command(CLI::App& app);
void register_parse_log_command(CLI::App& app);
void register_sweep_command(CLI::App& app);
void register_runs_command(CLI::App& app);
void register_report_command(CLI::App& app);
void register_compare_command(CLI::App& app);
void register_validate_command(CLI::App& app);
void register_find_max_command(CLI::App& app);

}  // namespace kvprof::cli
