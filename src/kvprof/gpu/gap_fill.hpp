// Holes in a run's live GPU readings, and their filling from the source's history: a reading
// that failed (a monitoring server that did not answer in time, a dropped connection) leaves a
// hole in gpu_mem_trace.csv; a source that keeps history (Prometheus, through query_range) is
// asked afterwards what it saw then, and those readings join the trace in time order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

// When one GPU was read live.
struct SampleTime {
  int64_t t_mono_ns = 0;
  unsigned gpu = 0;
};

// A stretch without a live reading of one GPU: from the reading before it (or the start of
// sampling) to the reading after it (or the end), steady-clock ns.
struct TimeGap {
  unsigned gpu = 0;
  int64_t from_mono_ns = 0;
  int64_t to_mono_ns = 0;
};

// The stretches of [begin_mono_ns, end_mono_ns] longer than two sampling intervals (and than one
// interval + 250 ms) in which a GPU of `gpus` has no reading in `live`, ordered by GPU, then time.
std::vector<TimeGap> find_gaps(const std::vector<SampleTime>& live,
                               const std::vector<unsigned>& gpus, int64_t begin_mono_ns,
                               int64_t end_mono_ns, uint32_t interval_ms);

struct GapFill {
  std::vector<TimeGap> gaps;
  std::vector<DeviceSample> filled;    // readings inside the gaps, in time order
  std::optional<std::string> history;  // where they came from; empty: the source keeps none
  std::optional<std::string> error;    // why the history could not be read
};

// Finds the gaps (as find_gaps) and reads `source`'s history over them every `interval_ms`;
// keeps each past reading that falls inside a gap of its GPU, at least half an interval from the
// live readings around it. `mono_minus_wall_ns` converts between the two clocks
// (t_mono_ns = t_wall_ms * 1e6 + mono_minus_wall_ns). Never fails: an error is noted in it.
GapFill fill_gaps(MemorySource& source, const std::vector<SampleTime>& live,
                  const std::vector<unsigned>& gpus, int64_t begin_mono_ns, int64_t end_mono_ns,
                  uint32_t interval_ms, int64_t mono_minus_wall_ns);

// Adds `rows` to the GPU trace at `path` (written by a stopped Sampler) so that device rows stay
// in time order, by writing a new file and renaming it over the old one; an io error otherwise,
// after which the old trace is untouched.
Expected<void> merge_into_trace(const std::string& path, const std::vector<DeviceSample>& rows);

// steady_clock ns minus system_clock ns, now: the offset fill_gaps takes.
int64_t mono_minus_wall_ns_now();

}  // namespace kvprof::gpu
