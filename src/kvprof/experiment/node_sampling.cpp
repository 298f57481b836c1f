// Every node of a multi-node job sampled (see node_sampling.hpp).
#include "kvprof/experiment/node_sampling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/profile/launcher.hpp"
#include "kvprof/report/html/csv.hpp"
#include "kvprof/results/run_folder.hpp"
#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/shell.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* k_node_trace = "gpu_mem_trace.csv";
constexpr size_t k_max_nodes = 4096;

std::optional<uint64_t> as_bytes(double v) {
  if (std::isnan(v) || v < 0 || v > 1e18) return std::nullopt;
  return static_cast<uint64_t>(v);
}

}  // namespace

NodeSamplers::~NodeSamplers() {
  stop();
}

Expected<std::unique_ptr<NodeSamplers>> NodeSamplers::start(const scheduler::JobEnvironment& job,
                                                            const fs::path& kvprof,
                                                            const fs::path& dir,
                                                            uint32_t interval_ms) {
  if (job.nodes < 2 || job.every_node_prefix.empty()) return nullptr;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return fail(ErrorKind::io, fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  }
  std::string command = "exec";
  for (const auto& word : job.every_node_prefix)
    command += " " + shell_quote(word);
  for (const std::string& word :
       {kvprof.string(), std::string("sample"), std::string("--node-dir"), dir.string(),
        std::string("--interval-ms"), std::to_string(std::max<uint32_t>(1, interval_ms)),
        std::string("--process-interval-ms"), std::string("0")})
    command += " " + shell_quote(word);
  auto step = profile::LaunchedServer::start(command, dir / "samplers.log", {});
  if (!step) return std::unexpected(step.error());
  std::unique_ptr<NodeSamplers> samplers(new NodeSamplers());
  samplers->m_step = std::move(*step);
  return samplers;
}

void NodeSamplers::stop() {
  if (!m_step) return;
  (void)m_step->stop(5.0);
  m_step.reset();
}

Expected<std::vector<results::NodeMemory>> read_node_traces(const fs::path& dir) {
  std::vector<results::NodeMemory> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path trace = entry.path() / k_node_trace;
    if (!entry.is_directory(ec) || !fs::is_regular_file(trace, ec)) continue;
    if (out.size() >= k_max_nodes) break;
    report::html::CsvRequest request;
    request.numeric = {"gpu", "used_bytes"};
    request.filter_column = "kind";
    request.filter_value = "device";
    auto columns = report::html::read_csv_file(trace, request);
    if (!columns) return std::unexpected(columns.error());
    const auto& gpu = columns->numeric[0];
    const auto& used = columns->numeric[1];
    std::map<unsigned, results::GpuMemory> gpus;
    for (size_t i = 0; i < columns->n_rows; ++i) {
      const auto index = as_bytes(gpu[i]);
      const auto bytes = as_bytes(used[i]);
      if (!index || *index > 4096 || !bytes) continue;
      auto& g = gpus[static_cast<unsigned>(*index)];
      g.gpu = static_cast<unsigned>(*index);
      if (!g.baseline_bytes) g.baseline_bytes = bytes;
      g.peak_bytes = std::max(g.peak_bytes.value_or(0), *bytes);
    }
    results::NodeMemory node{entry.path().filename().string(),
                             (fs::path("nodes") / entry.path().filename() / k_node_trace).string(),
                             {}};
    for (auto& [index, g] : gpus)
      node.gpus.push_back(std::move(g));
    out.push_back(std::move(node));
  }
  std::ranges::sort(out, {}, &results::NodeMemory::node);
  return out;
}

Expected<void> attach_node_memory(const fs::path& run_dir, const fs::path& dir,
                                  const std::vector<results::NodeMemory>& nodes) {
  auto summary = results::read_json_file(run_dir / "summary.json");
  if (!summary) return std::unexpected(summary.error());
  std::error_code ec;
  fs::create_directories(run_dir / "nodes", ec);
  json list = json::array();
  for (const auto& node : nodes) {
    fs::rename(dir / node.node, run_dir / "nodes" / node.node, ec);
    if (ec) {
      return fail(ErrorKind::io,
                  fmt::format("cannot move {} into {}: {}", (dir / node.node).string(),
                              run_dir.string(), ec.message()));
    }
    json gpus = json::array();
    for (const auto& g : node.gpus) {
      gpus.push_back({{"gpu", g.gpu},
                      {"first_used_bytes", g.baseline_bytes ? json(*g.baseline_bytes) : json()},
                      {"peak_used_bytes", g.peak_bytes ? json(*g.peak_bytes) : json()}});
    }
    list.push_back({{"node", node.node}, {"trace", node.trace}, {"gpus", std::move(gpus)}});
  }
  (*summary)["nodes"] = std::move(list);
  return write_file_atomically(run_dir / "summary.json", json_text(*summary, 2) + "\n");
}

}  // namespace kvprof::experiment
