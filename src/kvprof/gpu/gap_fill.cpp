// Gap filling from a source's history (see gap_fill.hpp).
#include "kvprof/gpu/gap_fill.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "kvprof/gpu/trace_file.hpp"
#include "kvprof/util/clock.hpp"

namespace kvprof::gpu {

namespace {

constexpr int64_t k_ns_per_ms = 1'000'000;
constexpr int64_t k_gap_slack_ns = 250 * k_ns_per_ms;  // a scheduling hiccup is not a gap

// The t_mono_ns of a trace row (its first cell); rows that do not start with a number sort first.
int64_t row_time_ns(const std::string& row) {
  int64_t t = INT64_MIN;
  std::from_chars(row.data(), row.data() + row.size(), t);
  return t;
}

}  // namespace

std::vector<TimeGap> find_gaps(const std::vector<SampleTime>& live,
                               const std::vector<unsigned>& gpus, int64_t begin_mono_ns,
                               int64_t end_mono_ns, uint32_t interval_ms) {
  const int64_t interval_ns =
      static_cast<int64_t>(std::max<uint32_t>(interval_ms, 1)) * k_ns_per_ms;
  const int64_t longest_ns = std::max(2 * interval_ns, interval_ns + k_gap_slack_ns);
  std::map<unsigned, std::vector<int64_t>> times;
  for (const unsigned gpu : gpus)
    times[gpu];
  for (const auto& s : live) {
    const auto it = times.find(s.gpu);
    if (it != times.end() && s.t_mono_ns >= begin_mono_ns && s.t_mono_ns <= end_mono_ns) {
      it->second.push_back(s.t_mono_ns);
    }
  }
  std::vector<TimeGap> gaps;
  for (auto& [gpu, t] : times) {
    std::sort(t.begin(), t.end());
    int64_t previous = begin_mono_ns;
    t.push_back(end_mono_ns);
    for (const int64_t next : t) {
      if (next - previous > longest_ns) gaps.push_back({gpu, previous, next});
      previous = next;
    }
  }
  return gaps;
}

GapFill fill_gaps(MemorySource& source, const std::vector<SampleTime>& live,
                  const std::vector<unsigned>& gpus, int64_t begin_mono_ns, int64_t end_mono_ns,
                  uint32_t interval_ms, int64_t mono_minus_wall_ns) {
  GapFill out;
  out.gaps = find_gaps(live, gpus, begin_mono_ns, end_mono_ns, interval_ms);
  out.history = source.history_name();
  if (out.gaps.empty() || !out.history) return out;

  // One history read from the first gap to the last, for every GPU with a gap: a gap is rarely
  // alone (every GPU of a node misses the same answers), and one request costs least.
  int64_t from_ns = INT64_MAX;
  int64_t to_ns = INT64_MIN;
  std::vector<unsigned> gap_gpus;
  for (const auto& g : out.gaps) {
    from_ns = std::min(from_ns, g.from_mono_ns);
    to_ns = std::max(to_ns, g.to_mono_ns);
    if (std::find(gap_gpus.begin(), gap_gpus.end(), g.gpu) == gap_gpus.end()) {
      gap_gpus.push_back(g.gpu);
    }
  }
  const auto to_wall_ms = [&](int64_t mono_ns) {
    return (mono_ns - mono_minus_wall_ns) / k_ns_per_ms;
  };
  auto past = source.history(gap_gpus, to_wall_ms(from_ns), to_wall_ms(to_ns) + 1, interval_ms);
  if (!past) {
    out.error = past.error().message;
    return out;
  }
  const int64_t margin_ns = static_cast<int64_t>(interval_ms) * k_ns_per_ms / 2;
  for (const auto& p : *past) {
    const int64_t t_mono_ns = p.t_wall_ms * k_ns_per_ms + mono_minus_wall_ns;
    const bool inside = std::any_of(out.gaps.begin(), out.gaps.end(), [&](const TimeGap& g) {
      return g.gpu == p.memory.gpu && t_mono_ns >= g.from_mono_ns + margin_ns &&
             t_mono_ns <= g.to_mono_ns - margin_ns;
    });
    if (inside) out.filled.push_back({t_mono_ns, p.t_wall_ms, p.memory});
  }
  std::stable_sort(out.filled.begin(), out.filled.end(),
                   [](const auto& a, const auto& b) { return a.t_mono_ns < b.t_mono_ns; });
  return out;
}

Expected<void> merge_into_trace(const std::string& path, const std::vector<DeviceSample>& rows) {
  if (rows.empty()) return {};
  std::ifstream in(path);
  if (!in) return fail(ErrorKind::io, fmt::format("cannot read {}", path));
  std::string header;
  std::getline(in, header);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(std::move(line) + '\n');
  }
  for (const auto& r : rows)
    lines.push_back(device_trace_row(r));
  std::stable_sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return row_time_ns(a) < row_time_ns(b);
  });
  const std::string tmp = path + ".merging";
  {
    auto out = TraceFile::create(tmp, header);
    if (!out) return std::unexpected(out.error());
    std::string text;
    for (const auto& line : lines) {
      text += line;
      if (text.size() >= (1U << 20)) {
        if (auto ok = out->append(text); !ok) {
          std::remove(tmp.c_str());
          return std::unexpected(ok.error());
        }
        text.clear();
      }
    }
    if (auto ok = out->append(text); !ok) {
      std::remove(tmp.c_str());
      return std::unexpected(ok.error());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return fail(ErrorKind::io, fmt::format("cannot replace {}: {}", path, ec.message()));
  }
  return {};
}

int64_t mono_minus_wall_ns_now() {
  return monotonic_now_ns() - unix_now_ms() * k_ns_per_ms;
}

}  // namespace kvprof::gpu
