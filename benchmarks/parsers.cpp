// Parsers of outside data at the sizes a hostile or very large input reaches: a safetensors header
// of 1k to 100k tensors (linear: the JSON library's callback parser was quadratic here).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/model/safetensors.hpp"

namespace {

// A safetensors file's first bytes: the 8-byte length and a header of `n` F16 tensors.
std::vector<uint8_t> safetensors_prefix(uint64_t n) {
  std::string header = "{";
  for (uint64_t i = 0; i < n; ++i) {
    header += fmt::format(
        "{}\"model.layers.{}.mlp.weight\":{{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":"
        "[{},{}]}}",
        i == 0 ? "" : ",", i, i * 8, i * 8 + 8);
  }
  header += "}";
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  return out;
}

void BM_SafetensorsHeader(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  const auto prefix = safetensors_prefix(n);
  const uint64_t file_size = prefix.size() + n * 8;
  for (auto _ : state) {
    auto tensors = kvprof::model::parse_safetensors_header(prefix, file_size);
    if (!tensors || tensors->size() != n) state.SkipWithError("the header did not parse");
    benchmark::DoNotOptimize(tensors);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prefix.size()));
  state.counters["tensors"] = static_cast<double>(n);
}
BENCHMARK(BM_SafetensorsHeader)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
