// Opening run folders (see run_folder.hpp).
#include "kvprof/results/run_folder.hpp"

#include <fmt/format.h>

#include "kvprof/results/history_db.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::results {

namespace fs = std::filesystem;
using nlohmann::json;

Expected<json> read_json_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return fail(ErrorKind::not_found, fmt::format("no {} in '{}'", path.filename().string(),
                                                  path.parent_path().string()));
  }
  auto text = sys::read_text_file(path, k_max_run_document_bytes);
  if (!text) return std::unexpected(text.error());
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return fail(ErrorKind::input, fmt::format("'{}' is not a JSON object", path.string()));
  }
  return j;
}

Expected<RunFolder> open_run(const std::string& run, const fs::path& results_dir) {
  const auto found = results::resolve_run(results_dir, run);
  if (!found) {
    return fail(ErrorKind::not_found,
                fmt::format("no run '{}': not a folder, nor a run id in {} (see `kvprof runs "
                            "--results-dir {}`)",
                            run, results_dir.string(), results_dir.string()));
  }
  return open_run_folder(*found);
}

Expected<RunFolder> open_run_folder(const fs::path& dir) {
  RunFolder folder;
  folder.dir = dir;
  std::error_code ec;
  if (!fs::exists(folder.dir / "summary.json", ec)) {
    return fail(ErrorKind::not_found,
                fmt::format("{} holds no summary.json: not a profile or bench run folder, or "
                            "its run never finished",
                            folder.dir.string()));
  }
  auto summary = sys::read_text_file(folder.dir / "summary.json", k_max_run_document_bytes);
  if (!summary) return std::unexpected(summary.error());
  auto summary_json = parse_json_input(*summary, (folder.dir / "summary.json").string());
  if (!summary_json) return std::unexpected(summary_json.error());
  folder.summary_json = std::move(*summary_json);
  if (fs::exists(folder.dir / "manifest.json", ec)) {
    auto m = sys::read_text_file(folder.dir / "manifest.json", k_max_run_document_bytes);
    if (!m) return std::unexpected(m.error());
    auto manifest = parse_json_input(*m, (folder.dir / "manifest.json").string());
    if (!manifest) return std::unexpected(manifest.error());
    folder.manifest_json = std::move(*manifest);
  }
  auto typed = read_run_summary(folder.summary_json, folder.manifest_json, folder.dir);
  if (!typed) return std::unexpected(typed.error());
  folder.summary = std::move(*typed);
  return folder;
}

Expected<RunSummary> load_run(const std::string& run, const fs::path& results_dir) {
  auto folder = open_run(run, results_dir);
  if (!folder) return std::unexpected(folder.error());
  return std::move(folder->summary);
}

}  // namespace kvprof::results
