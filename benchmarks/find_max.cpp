// Wall time of `kvprof find-max` against the full grid it replaces: the same trial (a profile run
// of one wave of `concurrency` requests, in-process, against the SIMULATED vLLM server with a
// small KV cache) run by the adaptive search — from the middle of the range, and from an estimate
// 20% off — and at every concurrency of the range.
// Usage: bench_find_max [MAX_CONCURRENCY=64] [NUM_GPU_BLOCKS=60] [GRID_STEP=1]
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "find_max_table.hpp"
#include "kvprof/experiment/find_max_profile.hpp"
#include "kvprof/sim/sim_memory_source.hpp"
#include "kvprof/sim/sim_server.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kvprof;

}  // namespace

int main(int argc, char** argv) {
  const uint32_t max_c = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 64;
  const uint32_t blocks = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 60;
  const uint32_t grid_step = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 1;
  sim::SimFlags flags;
  flags.model = "sim";
  flags.gpu = "H100";
  flags.port = 0;
  flags.num_gpu_blocks = blocks;
  flags.max_model_len = 512;
  auto config = sim::sim_config_from_flags(flags);
  if (!config) {
    fmt::print(stderr, "{}\n", config.error().message);
    return 1;
  }
  config->quiet = true;
  auto server = sim::SimServer::start(*config);
  if (!server) {
    fmt::print(stderr, "{}\n", server.error().message);
    return 1;
  }
  sim::SimMemorySource memory(**server, "H100");
  const fs::path out =
      fs::temp_directory_path() / fmt::format("kvprof_bench_find_max_{}", ::getpid());
  experiment::ProfileTrialSettings ts;
  ts.run.endpoint = (*server)->base_url();
  ts.run.model = "sim";
  ts.input_len = 64;
  ts.output_len = 32;
  ts.output_dir = out;
  profile::ProfileDeps deps;
  deps.memory = &memory;
  deps.memory_source = "simulated";
  const auto trial = experiment::make_profile_trial(ts, deps);
  experiment::FindMaxLimits limits;
  limits.input_len = ts.input_len;
  limits.output_len = ts.output_len;
  limits.max_concurrency = max_c;
  const uint32_t capacity = blocks / ((64 + 32 - 1 + 15) / 16);

  fmt::print(
      "range 1..{}, {} KV blocks of 16 tokens, 64 + 32 tokens per request: the KV cache "
      "holds {} requests\n",
      max_c, blocks, capacity);
  if (!benchmarks::print_find_max_table(
          limits, trial,
          {{"find-max, no estimate", std::nullopt},
           {"find-max, estimate 20% high", capacity + capacity / 5 + 1}},
          max_c, grid_step, fmt::format("grid over every concurrency (step {})", grid_step))) {
    return 1;
  }
  (*server)->stop();
  std::error_code ec;
  fs::remove_all(out, ec);
  return 0;
}
