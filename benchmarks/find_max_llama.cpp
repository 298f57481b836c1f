// Wall time of `kvprof find-max` on llama.cpp in-process against the grid it replaces: the same
// trial (a bench run of `concurrency` sequences of INPUT + OUTPUT tokens in one context of N_CTX
// cells) run by the adaptive search — from the llama.cpp planner's answer, and from the middle
// of the range — and at every concurrency of the range.
// Usage: bench_find_max_llama MODEL.gguf [N_CTX=4096] [MAX_CONCURRENCY=64] [INPUT=96]
//        [OUTPUT=32] [THREADS=0] [LLAMA_LIB]
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "find_max_table.hpp"
#include "kvprof/bench/bench_estimate.hpp"
#include "kvprof/experiment/find_max_bench.hpp"
#include "kvprof/llama/library.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kvprof;

uint32_t arg_u32(int argc, char** argv, int i, uint32_t fallback) {
  return argc > i ? static_cast<uint32_t>(std::atoi(argv[i])) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} MODEL.gguf [N_CTX] [MAX] [INPUT] [OUTPUT] [THREADS] [LIB]\n",
               argv[0]);
    return 2;
  }
  const uint32_t max_c = arg_u32(argc, argv, 3, 64);
  experiment::BenchTrialSettings s;
  s.config.engine.model_path = argv[1];
  s.config.engine.n_ctx = arg_u32(argc, argv, 2, 4096);
  s.config.ctx_from_user = true;
  s.input_len = arg_u32(argc, argv, 4, 96);
  s.output_len = arg_u32(argc, argv, 5, 32);
  s.config.engine.n_threads = static_cast<int32_t>(arg_u32(argc, argv, 6, 0));
  if (argc > 7) s.config.library.path = argv[7];
  if (auto lib = llama::find_llama_library(s.config.library); !lib) {
    fmt::print(stderr, "{}\n", lib.error().message);
    return 1;
  }
  s.output_dir =
      fs::temp_directory_path() / fmt::format("kvprof_bench_find_max_llama_{}", getpid());
  fs::create_directories(s.output_dir);
  const auto trial = experiment::make_bench_trial(s);
  experiment::FindMaxLimits limits;
  limits.input_len = s.input_len;
  limits.output_len = s.output_len;
  limits.max_concurrency = max_c;
  std::optional<uint32_t> planned;
  if (auto spec = bench::bench_model_spec(s.config)) {
    planned = experiment::bench_estimated_start(s.config, *spec, false, s.input_len, s.output_len);
  }
  fmt::print("{}: -c {}, {} + {} tokens per sequence, range 1..{}; the planner's answer: {}\n",
             argv[1], s.config.engine.n_ctx, s.input_len, s.output_len, max_c,
             planned ? std::to_string(*planned) : "none");
  if (!benchmarks::print_find_max_table(
          limits, trial,
          {{"find-max, from the llama.cpp plan", planned},
           {"find-max, no estimate (bisection from the middle)", std::nullopt}},
          max_c, 1, fmt::format("grid over every concurrency 1..{}", max_c))) {
    return 1;
  }
  std::error_code ec;
  fs::remove_all(s.output_dir, ec);
  return 0;
}
