// Answers derived from a profile run's conditions, so a reader need not work them out: the KV
// tokens in use at the KV peak (the server's count, or usage x capacity when it gives only those),
// the requests running there, the KV tokens one request holds measured against its prompt + output
// rounded up to the block size, whether each condition ran without queueing or preemption, and per
// input length the largest concurrency that did.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/profile/timeline.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::profile {

struct ConditionReport;

// Where a count of KV tokens in use came from.
enum class KvTokensSource { none, reported, usage_times_capacity };
// "reported", "usage x capacity", or "" for none.
std::string_view kv_tokens_source_name(KvTokensSource source);

// KV tokens in use at one scrape: the server's own count, else usage x capacity (the scrape's
// capacity, else `known_capacity_tokens`); nullopt (source none) when neither can be had.
std::optional<double> kv_tokens_used(const metrics::MetricsSnapshot& snapshot,
                                     std::optional<uint64_t> known_capacity_tokens,
                                     KvTokensSource& source);

// The scrape of a window with the most KV tokens in use.
struct KvPeak {
  std::optional<double> used_tokens;
  KvTokensSource source = KvTokensSource::none;
  std::optional<double> running;  // requests running at that scrape
};

// The scrape in `window` with the most KV tokens in use (points in time order; the capacity of
// earlier scrapes carries over to later ones that lack it). Empty when no scrape had a count.
KvPeak kv_peak_in(const std::vector<MetricsPoint>& points, Window window);

// What a condition asked for and what the server's gauges showed during it.
struct ConditionFacts {
  std::string condition_id;
  uint32_t input_tokens = 0;  // prompt tokens asked for (about, for text prompts)
  uint32_t output_tokens = 0;
  uint32_t concurrency = 0;
  uint64_t n_scrapes = 0;
  std::optional<double> peak_running;
  std::optional<double> peak_waiting;
  std::optional<double> preemptions;  // counter increase over the condition
  std::optional<uint64_t> block_size_tokens;
  KvPeak kv_peak;
};

struct ConditionAnswer {
  ConditionFacts facts;
  // False when requests waited or were preempted; nullopt when the server's gauges cannot tell
  // (no scrape in the condition, or no waiting gauge and no preemption).
  std::optional<bool> ran_without_queueing;
  // Prompt + output tokens rounded up to the block size (1 when the server reports none).
  uint64_t expected_kv_tokens_per_request = 0;
  // KV tokens in use at the KV peak / requests running there; nullopt when either is unknown.
  std::optional<double> measured_kv_tokens_per_request;
};

// The largest concurrency that ran without queueing or preemption at one input length.
struct ConcurrencyAnswer {
  uint32_t input_tokens = 0;
  // Concurrencies are taken in ascending order; every condition at a concurrency (all output
  // lengths and prefix modes) must have run clean. nullopt when the smallest did not, or cannot
  // be told.
  std::optional<uint32_t> max_concurrency;
  std::optional<uint32_t> first_queued_concurrency;  // the first that queued or preempted
  std::string note;                                  // one line: what bounds the answer
  std::vector<size_t> conditions;  // indices into DerivedAnswers::conditions, this input length
};

struct DerivedAnswers {
  std::vector<ConditionAnswer> conditions;                          // in run order
  std::vector<ConcurrencyAnswer> max_concurrency_without_queueing;  // by input length, ascending
  KvPeak load_kv_peak;                                              // over the whole load
};

// The answers from each condition's facts (pure: tests build the facts by hand).
DerivedAnswers derive_answers(std::vector<ConditionFacts> facts, KvPeak load_kv_peak = {});

// The facts of a run's conditions: lengths from the workload's requests (by condition id), the
// gauges from the scrapes in each condition's window.
std::vector<ConditionFacts> condition_facts(const std::vector<workload::RequestSpec>& requests,
                                            const std::vector<ConditionReport>& conditions,
                                            const std::vector<MetricsPoint>& points);

// summary.json's "derived" object.
nlohmann::json derived_json(const DerivedAnswers& answers);

// The derived fields of one condition object of summary.json, merged into `condition`.
void add_condition_fields(nlohmann::json& condition, const ConditionAnswer& answer);

// One line per input length ("largest concurrency without queueing or preemption: ...").
std::string derived_text(const DerivedAnswers& answers);

}  // namespace kvprof::profile
