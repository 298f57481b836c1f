// JSON and text of a parsed engine log (see engine_log_report.hpp).
#include "kvprof/report/text/engine_log_report.hpp"

#include <fmt/format.h>

#include <optional>

#include "kvprof/report/text/table.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::report::text {
namespace {

using namespace kvprof::enginelog;

// `text` as valid UTF-8 without control characters other than tab, so logs with binary garbage
// still print and serialise.
std::string clean(std::string_view text) {
  return to_valid_utf8(text, /*printable=*/true);
}

nlohmann::json source_json(const LineRef& source) {
  return {{"line", source.line_no}, {"text", clean(source.text)}};
}

nlohmann::json size_json(const PrintedSize& size) {
  return {{"bytes", size.bytes},
          {"tolerance_bytes", size.tolerance_bytes},
          {"printed", clean(size.text)}};
}

template <class T>
void put(nlohmann::json& obj, const char* name, const std::optional<Printed<T>>& p) {
  if (!p) return;
  nlohmann::json j = source_json(p->source);
  if constexpr (std::is_same_v<T, std::string>) {
    j["value"] = clean(p->value);
  } else if constexpr (std::is_same_v<T, PrintedSize>) {
    j["value"] = size_json(p->value);
  } else {
    j["value"] = p->value;
  }
  obj[name] = std::move(j);
}

template <class T>
std::string show(const std::optional<Printed<T>>& p) {
  if constexpr (std::is_same_v<T, std::string>) {
    return clean(p->value);
  } else if constexpr (std::is_same_v<T, PrintedSize>) {
    return clean(p->value.text);
  } else {
    return fmt::format("{}", p->value);
  }
}

// Adds a "name  value  line" row when the value was printed.
template <class T>
void row(Table& table, const char* name, const std::optional<Printed<T>>& p) {
  if (p) table.add_row({name, show(p), fmt::format("{}", p->source.line_no)});
}

std::string mib(uint64_t bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / k_mib);
}

}  // namespace

nlohmann::json engine_log_json(const EngineLogReport& log) {
  nlohmann::json j = {{"schema_version", k_engine_log_schema_version},
                      {"kind", "engine_log"},
                      {"engine", engines::engine_name(log.engine)},
                      {"confidence", "reported by engine"}};
  j["version"] = nullptr;
  if (log.version) put(j, "version", log.version);
  j["release_from_wording"] = nullptr;
  if (log.release_from_wording && !log.version) {
    const auto& w = *log.release_from_wording;
    j["release_from_wording"] = {
        {"release", w.release}, {"reason", w.reason}, {"line", w.source.line_no}};
  }
  auto& figures = j["figures"] = nlohmann::json::array();
  for (const auto& f : log.figures) {
    nlohmann::json fj = {{"component", component_name(f.component)},
                         {"device", clean(f.device)},
                         {"bytes", f.size.bytes},
                         {"tolerance_bytes", f.size.tolerance_bytes},
                         {"printed", clean(f.size.text)},
                         {"context", f.context},
                         {"superseded", f.superseded},
                         {"line", f.source.line_no},
                         {"text", clean(f.source.text)}};
    if (!f.cache_type.empty()) fj["cache_type"] = clean(f.cache_type);
    figures.push_back(std::move(fj));
  }
  auto& devices = j["devices"] = nlohmann::json::array();
  for (const auto& t : totals_by_device(log)) {
    devices.push_back({{"device", clean(t.device)},
                       {"weights_bytes", t.weights_bytes},
                       {"kv_cache_bytes", t.kv_cache_bytes},
                       {"compute_bytes", t.compute_bytes},
                       {"output_bytes", t.output_bytes},
                       {"cuda_graph_bytes", t.cuda_graph_bytes}});
  }
  auto& breakdown = j["memory_breakdown"] = nlohmann::json::array();
  for (const auto& r : log.breakdown) {
    nlohmann::json rj = {{"device", clean(r.device)},
                         {"description", clean(r.description)},
                         {"self_bytes", r.self_bytes},
                         {"model_bytes", r.model_bytes},
                         {"context_bytes", r.context_bytes},
                         {"compute_bytes", r.compute_bytes},
                         {"tolerance_bytes", k_breakdown_tolerance_bytes},
                         {"line", r.source.line_no},
                         {"text", clean(r.source.text)}};
    if (r.total_bytes) rj["total_bytes"] = *r.total_bytes;
    if (r.free_bytes) rj["free_bytes"] = *r.free_bytes;
    if (r.unaccounted_bytes) rj["unaccounted_bytes"] = *r.unaccounted_bytes;
    breakdown.push_back(std::move(rj));
  }
  const auto& s = log.settings;
  auto& sj = j["settings"] = nlohmann::json::object();
  put(sj, "n_ctx", s.n_ctx);
  put(sj, "n_ctx_seq", s.n_ctx_seq);
  put(sj, "n_seq_max", s.n_seq_max);
  put(sj, "n_batch", s.n_batch);
  put(sj, "n_ubatch", s.n_ubatch);
  put(sj, "n_slots", s.n_slots);
  put(sj, "flash_attn", s.flash_attn);
  put(sj, "kv_unified", s.kv_unified);
  put(sj, "kv_cells", s.kv_cells);
  put(sj, "kv_layers", s.kv_layers);
  put(sj, "kv_seqs", s.kv_seqs);
  put(sj, "type_k", s.type_k);
  put(sj, "type_v", s.type_v);
  put(sj, "offloaded_layers", s.offloaded_layers);
  put(sj, "offloadable_layers", s.offloadable_layers);
  put(sj, "num_gpu_blocks", s.num_gpu_blocks);
  put(sj, "kv_cache_tokens", s.kv_cache_tokens);
  put(sj, "max_total_num_tokens", s.max_total_num_tokens);
  put(sj, "concurrency_request_tokens", s.concurrency_request_tokens);
  put(sj, "max_concurrency", s.max_concurrency);
  put(sj, "cuda_graphs", s.cuda_graphs);
  put(sj, "enforce_eager", s.enforce_eager);
  if (!log.graph_captures.empty()) {
    auto& gj = j["cuda_graph_captures"] = nlohmann::json::array();
    for (const auto& g : log.graph_captures)
      gj.push_back({{"description", clean(g.description)}, {"graphs", g.graphs}});
  }
  const auto& m = log.model;
  auto& mj = j["model"] = nlohmann::json::object();
  put(mj, "architecture", m.architecture);
  put(mj, "name", m.name);
  put(mj, "file_type", m.file_type);
  put(mj, "file_type_name", m.file_type_name);
  put(mj, "file_size", m.file_size);
  put(mj, "n_params", m.n_params);
  put(mj, "block_count", m.block_count);
  put(mj, "embedding_length", m.embedding_length);
  put(mj, "head_count", m.head_count);
  put(mj, "head_count_kv", m.head_count_kv);
  put(mj, "context_length", m.context_length);
  put(mj, "n_vocab", m.n_vocab);
  j["lines"] = {{"read", log.n_lines},
                {"recognised", log.n_recognised_lines},
                {"skipped_too_long", log.n_skipped_long_lines}};
  j["truncated"] = log.truncated;
  return j;
}

std::string engine_log_text(const EngineLogReport& log) {
  std::string out = fmt::format("engine: {}", engines::engine_name(log.engine));
  if (log.version) {
    out += fmt::format(" (release {})", show(log.version));
  } else if (log.release_from_wording) {
    const auto& w = *log.release_from_wording;
    out += fmt::format(
        " (no release printed; {} {} by its wording: {} (line {}); plan it with "
        "--engine-version {})",
        engines::engine_row(log.engine).display_name, w.release, w.reason, w.source.line_no,
        w.release);
  }
  out += fmt::format("   {} lines read, {} recognised", log.n_lines, log.n_recognised_lines);
  if (log.n_skipped_long_lines > 0) {
    out += fmt::format(", {} too long and skipped", log.n_skipped_long_lines);
  }
  out += log.truncated ? ", input cut at the size limit\n\n" : "\n\n";

  if (!log.figures.empty()) {
    Table table({"component", "device", "size (as printed)", "line", "note"});
    for (const auto& f : log.figures) {
      std::string note = clean(f.cache_type);
      if (f.context > 0) note += (note.empty() ? "" : ", ") + fmt::format("context {}", f.context);
      if (f.superseded) note += (note.empty() ? "" : ", ") + std::string("superseded");
      table.add_row({std::string(component_name(f.component)),
                     f.device.empty() ? "-" : clean(f.device), clean(f.size.text),
                     fmt::format("{}", f.source.line_no), note});
    }
    out += "Memory the engine reported:\n" + table.render() + "\n";
    Table totals({"device", "weights", "KV cache", "compute", "output", "CUDA graphs"});
    for (const auto& t : totals_by_device(log)) {
      totals.add_row({t.device.empty() ? "-" : clean(t.device), mib(t.weights_bytes),
                      mib(t.kv_cache_bytes), mib(t.compute_bytes), mib(t.output_bytes),
                      mib(t.cuda_graph_bytes)});
    }
    out += "Per device (superseded reservations left out):\n" + totals.render() + "\n";
  }
  if (!log.breakdown.empty()) {
    Table table(
        {"device", "total", "free", "self", "model", "context", "compute", "unaccounted", "line"});
    auto opt = [](const std::optional<uint64_t>& v) { return v ? mib(*v) : std::string("-"); };
    for (const auto& r : log.breakdown) {
      table.add_row(
          {clean(r.device), opt(r.total_bytes), opt(r.free_bytes), mib(r.self_bytes),
           mib(r.model_bytes), mib(r.context_bytes), mib(r.compute_bytes),
           r.unaccounted_bytes
               ? fmt::format("{:.0f} MiB", static_cast<double>(*r.unaccounted_bytes) / k_mib)
               : std::string("-"),
           fmt::format("{}", r.source.line_no)});
    }
    out += "Memory breakdown printed by the engine (MiB, +-0.5):\n" + table.render() + "\n";
  }
  Table settings({"setting", "value", "line"});
  const auto& s = log.settings;
  row(settings, "n_ctx", s.n_ctx);
  row(settings, "n_ctx_seq", s.n_ctx_seq);
  row(settings, "n_seq_max", s.n_seq_max);
  row(settings, "n_batch", s.n_batch);
  row(settings, "n_ubatch", s.n_ubatch);
  row(settings, "n_slots", s.n_slots);
  row(settings, "flash_attn", s.flash_attn);
  row(settings, "kv_unified", s.kv_unified);
  row(settings, "kv cells", s.kv_cells);
  row(settings, "kv layers", s.kv_layers);
  row(settings, "kv seqs", s.kv_seqs);
  row(settings, "type_k", s.type_k);
  row(settings, "type_v", s.type_v);
  row(settings, "offloaded layers", s.offloaded_layers);
  row(settings, "offloadable layers", s.offloadable_layers);
  row(settings, "GPU blocks", s.num_gpu_blocks);
  row(settings, "KV cache tokens", s.kv_cache_tokens);
  row(settings, "max total tokens", s.max_total_num_tokens);
  row(settings, "concurrency for tokens", s.concurrency_request_tokens);
  row(settings, "max concurrency", s.max_concurrency);
  row(settings, "CUDA graphs", s.cuda_graphs);
  row(settings, "enforce_eager", s.enforce_eager);
  const auto& m = log.model;
  row(settings, "model architecture", m.architecture);
  row(settings, "model name", m.name);
  row(settings, "file type", m.file_type_name);
  row(settings, "file size", m.file_size);
  row(settings, "model params", m.n_params);
  row(settings, "block_count", m.block_count);
  row(settings, "embedding_length", m.embedding_length);
  row(settings, "head_count", m.head_count);
  row(settings, "head_count_kv", m.head_count_kv);
  row(settings, "context_length", m.context_length);
  out += "Settings and model facts the engine printed:\n" + settings.render();
  return out;
}

}  // namespace kvprof::report::text
