// The request workload: the grid of conditions (input length x output length x concurrency x
// prefix reuse), one record per request, generated deterministically from a seed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::workload {

enum class PrefixMode { low, high };  // low: no shared prefix; high: a long shared prefix
enum class PromptFormat { tokens, text };
enum class Arrival { closed, poisson };
// How many requests a condition gets: n_per_condition x concurrency (so the concurrency is
// actually reached and held), or exactly n_per_condition (the seed 002 behaviour).
enum class CountMode { times_concurrency, exact };

std::string_view prefix_mode_name(PrefixMode mode);
Expected<PrefixMode> parse_prefix_mode(std::string_view text);  // input error when unknown
std::string_view prompt_format_name(PromptFormat format);
Expected<PromptFormat> parse_prompt_format(std::string_view text);
std::string_view arrival_name(Arrival arrival);
Expected<Arrival> parse_arrival(std::string_view text);
std::string_view count_mode_name(CountMode mode);
Expected<CountMode> parse_count_mode(std::string_view text);

// Bounds on what a workload may ask for, checked when generating and when reading a file.
inline constexpr uint32_t k_max_input_len = 1u << 20;
inline constexpr uint32_t k_max_output_len = 1u << 20;
inline constexpr uint32_t k_max_concurrency = 100'000;
inline constexpr uint64_t k_max_requests = 10'000'000;
inline constexpr uint64_t k_max_total_prompt_tokens = 256ull << 20;

struct GridOptions {
  std::vector<uint32_t> input_lens{8192, 16384, 32768};
  std::vector<uint32_t> output_lens{64, 128};
  std::vector<uint32_t> concurrencies{8, 16, 32, 64};
  std::vector<PrefixMode> prefix_modes{PrefixMode::low, PrefixMode::high};
  uint32_t n_per_condition = 1;
  CountMode count_mode = CountMode::times_concurrency;
  uint64_t seed = 0;
  double request_rate = 0.0;  // requests/s for open-loop Poisson arrivals; 0 = closed loop
  PromptFormat prompt_format = PromptFormat::tokens;
  double prefix_fraction = 0.9;  // share of the input that is the shared prefix in "high" mode
  uint32_t token_id_min = 1000;  // prompt token IDs are drawn from [token_id_min, token_id_max)
  uint32_t token_id_max = 30000;
};

struct RequestSpec {
  uint64_t request_id = 0;   // unique in the workload, in send order
  std::string condition_id;  // e.g. "in8192_out64_c8_high"
  uint32_t input_len = 0;    // prompt tokens (exact for token prompts, about for text)
  uint32_t output_len = 0;
  uint32_t concurrency = 1;  // closed loop: requests in flight; open loop: the most in flight
  PrefixMode prefix_mode = PrefixMode::low;
  uint32_t prefix_len = 0;  // leading prompt tokens shared by every request of the condition
  PromptFormat prompt_format = PromptFormat::tokens;
  std::vector<uint32_t> prompt_token_ids;  // tokens format: exactly input_len IDs
  std::string prompt_text;                 // text format: input_len words
  Arrival arrival = Arrival::closed;
  double send_offset_s = 0.0;  // poisson: intended send time after the condition starts
  bool ignore_eos = true;
  uint32_t max_tokens = 0;  // = output_len
};

// A run of consecutive requests with the same condition_id.
struct Condition {
  std::string id;
  size_t first = 0;  // index of its first request in the workload
  size_t count = 0;
};

// The condition id for a grid point, e.g. "in8192_out64_c8_high".
std::string condition_id(uint32_t input_len, uint32_t output_len, uint32_t concurrency,
                         PrefixMode mode);

// Checks `options` (non-empty axes, lengths and counts within the k_max bounds, a valid token
// range and prefix fraction); returns a usage error naming the bad setting.
Expected<void> validate(const GridOptions& options);

// The number of requests and prompt tokens `options` would generate (no allocation).
struct GridSize {
  uint64_t n_conditions = 0;
  uint64_t n_requests = 0;
  uint64_t n_prompt_tokens = 0;
};
GridSize grid_size(const GridOptions& options);

// Generates the workload: conditions in the order input_lens x output_lens x concurrencies x
// prefix_modes (the last varies fastest); the same options and seed give the same requests.
// Returns a usage error when validate() fails or the workload would exceed the bounds.
Expected<std::vector<RequestSpec>> generate(const GridOptions& options);

// Groups consecutive requests by condition_id, in order. A condition id that reappears after
// another condition is a separate Condition.
std::vector<Condition> conditions_of(const std::vector<RequestSpec>& requests);

}  // namespace kvprof::workload
