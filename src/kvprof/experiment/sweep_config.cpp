// Parsing and checking the sweep file (see sweep_config.hpp). Every problem is collected with the
// position yaml-cpp gives its node; nothing stops at the first one.
#include "kvprof/experiment/sweep_config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/dtype.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/utf8.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::experiment {

namespace {

// Per-model keys, which the top level may also hold as defaults.
const std::vector<std::string> k_model_keys = {"model_id",
                                               "container_name",
                                               "input_lengths",
                                               "output_lengths",
                                               "batch_sizes",
                                               "dtype",
                                               "tensor_parallel_size",
                                               "pipeline_parallel_size",
                                               "quantization",
                                               "kv_cache_dtype",
                                               "gpu_memory_utilization",
                                               "max_model_len",
                                               "model_params",
                                               "num_layers",
                                               "num_heads",
                                               "num_kv_heads",
                                               "head_dim",
                                               "hidden_size",
                                               "intermediate_size",
                                               "vocab_size",
                                               "launch",
                                               "endpoint",
                                               "engine",
                                               "gpu"};
const std::vector<std::string> k_sweep_keys = {"models",           "name",
                                               "baseline_s",       "post_warmup_s",
                                               "warmup_requests",  "requests_per_condition",
                                               "launch_timeout_s", "launch_grace_s",
                                               "min_condition_s"};

SourcePos pos_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return {};
  return {m.line + 1, m.column + 1};
}

class Checker {
 public:
  explicit Checker(ConfigParse& out) : m_out(out) {}

  void error(SourcePos pos, std::string message) {
    if (m_out.errors.size() >= k_max_reported_errors) {
      ++m_out.n_errors_dropped;
      return;
    }
    m_out.errors.push_back({pos, std::move(message)});
  }
  void error(const YAML::Node& n, std::string message) { error(pos_of(n), std::move(message)); }
  void warn(const YAML::Node& n, std::string message) {
    if (m_out.warnings.size() < k_max_reported_errors)
      m_out.warnings.push_back({pos_of(n), std::move(message)});
  }

  static std::string kind_of(const YAML::Node& n) {
    if (n.IsNull()) return "null";
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    return fmt::format("'{}'", n.Scalar().substr(0, 40));
  }

  std::optional<std::string> string(const YAML::Node& n, const std::string& path,
                                    bool allow_null = false) {
    if (allow_null && n.IsNull()) return std::string();
    if (!n.IsScalar()) {
      error(n, fmt::format("{}: expected a string, got {}", path, kind_of(n)));
      return std::nullopt;
    }
    if (n.Scalar().size() > k_max_string_chars) {
      error(n, fmt::format("{}: longer than {} characters", path, k_max_string_chars));
      return std::nullopt;
    }
    if (n.Scalar().empty()) {
      error(n, fmt::format("{}: empty", path));
      return std::nullopt;
    }
    return n.Scalar();
  }

  std::optional<int64_t> integer(const YAML::Node& n, const std::string& path, int64_t lo,
                                 int64_t hi) {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && end == s.data() + s.size()) {
        if (v < lo || v > hi) {
          error(n, fmt::format("{}: {} is out of range [{}, {}]", path, v, lo, hi));
          return std::nullopt;
        }
        return v;
      }
    }
    error(n, fmt::format("{}: expected an integer, got {}", path, kind_of(n)));
    return std::nullopt;
  }

  std::optional<double> number(const YAML::Node& n, const std::string& path, double lo, double hi) {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      double v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && end == s.data() + s.size() && std::isfinite(v)) {
        if (v < lo || v > hi) {
          error(n, fmt::format("{}: {} is out of range [{}, {}]", path, s, lo, hi));
          return std::nullopt;
        }
        return v;
      }
    }
    error(n, fmt::format("{}: expected a number, got {}", path, kind_of(n)));
    return std::nullopt;
  }

  std::optional<std::vector<uint32_t>> uint_list(const YAML::Node& n, const std::string& path,
                                                 uint32_t hi) {
    if (!n.IsSequence()) {
      error(n, fmt::format("{}: expected a list of integers, e.g. [256, 512], got {}", path,
                           kind_of(n)));
      return std::nullopt;
    }
    if (n.size() == 0 || n.size() > k_max_list_items) {
      error(n, fmt::format("{}: needs 1 to {} items, has {}", path, k_max_list_items, n.size()));
      return std::nullopt;
    }
    std::vector<uint32_t> out;
    bool ok = true;
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node item = n[i];
      auto v = integer(item, fmt::format("{}[{}]", path, i), 1, hi);
      if (!v) {
        ok = false;
        continue;
      }
      if (std::find(out.begin(), out.end(), static_cast<uint32_t>(*v)) != out.end()) {
        error(item, fmt::format("{}[{}]: {} appears twice", path, i, *v));
        ok = false;
        continue;
      }
      out.push_back(static_cast<uint32_t>(*v));
    }
    if (!ok) return std::nullopt;
    return out;
  }

  // An unknown key: its name and the closest known one.
  void unknown_key(const YAML::Node& key, const std::string& where,
                   const std::vector<std::string>& known) {
    const std::string name = key.IsScalar() ? key.Scalar().substr(0, 80) : "(not a string)";
    const auto close = closest_matches(name, known, 1);
    error(key, fmt::format("{}unknown key '{}'{}", where, name,
                           close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0])));
  }

 private:
  ConfigParse& m_out;
};

const std::set<std::string, std::less<>> k_dtypes = {"auto",     "float16", "half",    "fp16",
                                                     "bfloat16", "bf16",    "float32", "float"};

// Where the first byte that is not valid UTF-8 lies in `text` (line and column, 1-based; the
// column counts bytes); nullopt when all of it is valid.
std::optional<SourcePos> first_invalid_utf8(std::string_view text) {
  const size_t bad = valid_utf8_length(text);
  if (bad == text.size()) return std::nullopt;
  const std::string_view before = text.substr(0, bad);
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == std::string_view::npos ? bad : bad - line_start - 1;
  return SourcePos{static_cast<int>(std::count(before.begin(), before.end(), '\n')) + 1,
                   static_cast<int>(column) + 1};
}

// Applies one per-model key (at the top level: a default) to `e`.
void apply_model_key(Checker& c, const std::string& key, const YAML::Node& v,
                     const std::string& path, ModelEntry& e) {
  const auto u32 = [&](int64_t lo, int64_t hi) -> std::optional<uint32_t> {
    if (v.IsNull()) return std::nullopt;
    auto n = c.integer(v, path, lo, hi);
    return n ? std::optional<uint32_t>(static_cast<uint32_t>(*n)) : std::nullopt;
  };
  if (key == "model_id") {
    if (auto s = c.string(v, path)) e.model_id = *s;
    e.model_id_pos = pos_of(v);
  } else if (key == "container_name") {
    if (auto s = c.string(v, path, true)) e.container_name = *s;
  } else if (key == "input_lengths") {
    if (auto l = c.uint_list(v, path, workload::k_max_input_len)) e.input_lengths = *l;
  } else if (key == "output_lengths") {
    if (auto l = c.uint_list(v, path, workload::k_max_output_len)) e.output_lengths = *l;
  } else if (key == "batch_sizes") {
    if (auto l = c.uint_list(v, path, workload::k_max_concurrency)) e.batch_sizes = *l;
  } else if (key == "dtype") {
    if (auto s = c.string(v, path)) {
      if (k_dtypes.contains(to_lower(*s))) {
        e.dtype = to_lower(*s);
      } else {
        c.error(
            v, fmt::format("{}: '{}' is not a dtype (auto, float16, bfloat16, float32)", path, *s));
      }
    }
  } else if (key == "tensor_parallel_size") {
    if (auto n = c.integer(v, path, 1, 1024)) e.tensor_parallel_size = static_cast<uint32_t>(*n);
  } else if (key == "pipeline_parallel_size") {
    if (auto n = c.integer(v, path, 1, 1024)) e.pipeline_parallel_size = static_cast<uint32_t>(*n);
  } else if (key == "quantization") {
    if (auto s = c.string(v, path, true)) e.quantization = *s;
  } else if (key == "kv_cache_dtype") {
    if (auto s = c.string(v, path, true)) {
      const std::string text = s->empty() ? "auto" : *s;
      if (auto k = estimate::parse_kv_cache_dtype(text); k) {
        e.kv_cache_dtype = text;
      } else {
        c.error(v, fmt::format("{}: {}", path, k.error().message));
      }
    }
  } else if (key == "gpu_memory_utilization") {
    if (v.IsNull()) {
      e.gpu_memory_utilization.reset();
    } else if (auto d = c.number(v, path, 0.01, 1.0)) {
      e.gpu_memory_utilization = *d;
    }
  } else if (key == "max_model_len") {
    if (v.IsNull()) {
      e.max_model_len.reset();
    } else if (auto n = c.integer(v, path, 1, int64_t{1} << 30)) {
      e.max_model_len = static_cast<uint64_t>(*n);
    }
  } else if (key == "model_params") {
    if (v.IsNull()) {
      e.model_params.reset();
    } else if (auto d = c.number(v, path, 1e3, 1e14)) {
      e.model_params = *d;
    }
  } else if (key == "num_layers") {
    e.num_layers = u32(1, 4096);
  } else if (key == "num_heads") {
    e.num_heads = u32(1, 4096);
  } else if (key == "num_kv_heads") {
    e.num_kv_heads = u32(1, 4096);
  } else if (key == "head_dim") {
    e.head_dim = u32(1, 65536);
  } else if (key == "hidden_size") {
    e.hidden_size = u32(1, 1 << 20);
  } else if (key == "intermediate_size") {
    e.intermediate_size = u32(1, 1 << 22);
  } else if (key == "vocab_size") {
    e.vocab_size = u32(1, 1 << 24);
  } else if (key == "launch") {
    e.launch_pos = pos_of(v);
    if (auto s = c.string(v, path, true)) {
      e.launch = *s;
      for (const auto& name : profile::placeholder_names(*s)) {
        const auto& known = launch_placeholders();
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          const auto close = closest_matches(name, known, 1);
          c.error(v, fmt::format(
                         "{}: unknown placeholder {{{}}}{}", path, name.substr(0, 80),
                         close.empty() ? "" : fmt::format(" (did you mean {{{}}}?)", close[0])));
        }
      }
    }
  } else if (key == "endpoint") {
    if (auto s = c.string(v, path, true)) {
      if (!s->empty() && !s->starts_with("http://") && !s->starts_with("https://")) {
        c.error(v,
                fmt::format("{}: '{}' is not an http:// or https:// URL", path, s->substr(0, 80)));
      } else {
        e.endpoint = *s;
      }
    }
  } else if (key == "engine") {
    e.engine_pos = pos_of(v);
    if (auto s = c.string(v, path)) {
      if (auto k = engines::parse_planned_engine(*s); k) {
        e.engine = *s;
      } else {
        c.error(v, fmt::format("{}: {}", path, k.error().message));
      }
    }
  } else if (key == "gpu") {
    e.gpu_pos = pos_of(v);
    if (auto s = c.string(v, path, true)) {
      if (s->empty() || gpu::names_no_gpu(*s) || gpu::find_gpu(*s)) {
        e.gpu = *s;
      } else {
        c.error(v, fmt::format("{}: {}", path, gpu::find_gpu(*s).error().message));
      }
    }
  }
}

// Walks a mapping's keys: duplicates and unknown keys are errors; `on_key` gets the others.
void for_each_key(
    Checker& c, const YAML::Node& map, const std::string& where,
    const std::vector<std::string>& known,
    const std::function<void(const std::string&, const YAML::Node&, const YAML::Node&)>& on_key) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar() || std::find(known.begin(), known.end(), key.Scalar()) == known.end()) {
      c.unknown_key(key, where, known);
      continue;
    }
    if (!seen.insert(key.Scalar()).second) {
      c.error(key, fmt::format("{}'{}' appears twice", where, key.Scalar()));
      continue;
    }
    on_key(key.Scalar(), key, it->second);
  }
}

// `given`: the keys the entry or the top level holds (a key given with a bad value was reported).
void check_entry(Checker& c, const ModelEntry& e, const std::set<std::string>& given,
                 const std::string& where) {
  for (const char* key : {"model_id", "input_lengths", "output_lengths", "batch_sizes"}) {
    if (!given.contains(key))
      c.error(e.pos, fmt::format("{}missing required key '{}'", where, key));
  }
  if (!e.container_name.empty() && (!e.launch.empty() || !e.endpoint.empty())) {
    c.error(e.pos, fmt::format("{}give 'container_name', 'launch' or 'endpoint', one of them "
                               "(each names the server)",
                               where));
  }
  if (!e.launch.empty() && !e.endpoint.empty()) {
    c.error(e.launch_pos, fmt::format("{}give 'launch' or 'endpoint', not both (a launched "
                                      "server listens on a port kvprof picks)",
                                      where));
  }
  const uint64_t n_conditions =
      uint64_t{e.input_lengths.size()} * e.output_lengths.size() * e.batch_sizes.size();
  if (n_conditions > k_max_conditions_per_entry) {
    c.error(e.pos, fmt::format("{}{} conditions (input x output x batch), at most {}", where,
                               n_conditions, k_max_conditions_per_entry));
  }
  if (!e.launch.empty()) {
    const auto names = profile::placeholder_names(e.launch);
    const auto needs = [&](const char* name, bool has) {
      if (!has && std::find(names.begin(), names.end(), name) != names.end()) {
        c.error(e.launch_pos,
                fmt::format("{}launch uses {{{}}} but '{}' is not set", where, name, name));
      }
    };
    needs("max_model_len", e.max_model_len.has_value());
    needs("quantization", !e.quantization.empty());
    needs("gpu_memory_utilization", e.gpu_memory_utilization.has_value());
  }
}

void read_settings_key(Checker& c, const std::string& key, const YAML::Node& v, SweepSettings& s) {
  if (key == "name") {
    if (auto n = c.string(v, key)) {
      const bool safe = n->size() <= 100 &&
                        std::all_of(n->begin(), n->end(),
                                    [](char ch) {
                                      return std::isalnum(static_cast<unsigned char>(ch)) ||
                                             ch == '-' || ch == '_' || ch == '.';
                                    }) &&
                        (*n)[0] != '.';
      if (safe) {
        s.name = *n;
      } else {
        c.error(v,
                "name: use letters, digits, '-', '_' and '.' (at most 100, not starting "
                "with '.')");
      }
    }
  } else if (key == "baseline_s") {
    if (auto d = c.number(v, key, 0, 3600)) s.baseline_s = *d;
  } else if (key == "post_warmup_s") {
    if (auto d = c.number(v, key, 0, 3600)) s.post_warmup_s = *d;
  } else if (key == "warmup_requests") {
    if (auto n = c.integer(v, key, 0, 1000)) s.warmup_requests = static_cast<uint32_t>(*n);
  } else if (key == "requests_per_condition") {
    if (auto n = c.integer(v, key, 1, 1000)) s.requests_per_condition = static_cast<uint32_t>(*n);
  } else if (key == "launch_timeout_s") {
    if (auto d = c.number(v, key, 0.1, 86400)) s.launch_timeout_s = *d;
  } else if (key == "launch_grace_s") {
    if (auto d = c.number(v, key, 0, 3600)) s.launch_grace_s = *d;
  } else if (key == "min_condition_s") {
    if (auto d = c.number(v, key, 0, 3600)) s.min_condition_s = *d;
  }
}

}  // namespace

const std::vector<std::string>& launch_placeholders() {
  static const std::vector<std::string> k = {"model",
                                             "port",
                                             "host",
                                             "max_concurrency",
                                             "gpu",
                                             "dtype",
                                             "tensor_parallel_size",
                                             "pipeline_parallel_size",
                                             "quantization",
                                             "kv_cache_dtype",
                                             "gpu_memory_utilization",
                                             "max_model_len",
                                             "engine_args"};
  return k;
}

ConfigParse parse_sweep_config(std::string_view text) {
  ConfigParse out;
  Checker c(out);
  if (text.size() > k_max_config_bytes) {
    c.error(SourcePos{}, fmt::format("the file is over {} bytes", k_max_config_bytes));
    return out;
  }
  if (const auto bad = first_invalid_utf8(text)) {
    c.error(*bad,
            "the file is not UTF-8 here (saved in another encoding, e.g. Latin-1?); save "
            "it as UTF-8");
    return out;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    c.error(e.mark.is_null() ? SourcePos{} : SourcePos{e.mark.line + 1, e.mark.column + 1},
            "YAML syntax: " + e.msg);
    return out;
  }
  if (!root.IsMap()) {
    c.error(root, "expected a mapping with a 'models' list at the top");
    return out;
  }
  std::vector<std::string> top_known = k_sweep_keys;
  top_known.insert(top_known.end(), k_model_keys.begin(), k_model_keys.end());
  ModelEntry defaults;
  std::set<std::string> given_at_top;
  YAML::Node models;
  bool have_models = false;
  for_each_key(
      c, root, "", top_known,
      [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
        if (key == "models") {
          models = v;
          have_models = true;
        } else if (key == "model_id") {
          c.error(k, "model_id belongs in an entry of 'models'");
        } else if (std::find(k_sweep_keys.begin(), k_sweep_keys.end(), key) != k_sweep_keys.end()) {
          read_settings_key(c, key, v, out.config.settings);
        } else {
          given_at_top.insert(key);
          apply_model_key(c, key, v, key, defaults);
        }
      });
  if (!have_models) {
    c.error(root, "missing required key 'models' (a list of models to profile)");
    return out;
  }
  if (!models.IsSequence() || models.size() == 0) {
    c.error(models, fmt::format("models: expected a non-empty list of models, got {}",
                                models.IsSequence() ? "an empty list" : Checker::kind_of(models)));
    return out;
  }
  if (models.size() > k_max_models) {
    c.error(models, fmt::format("models: {} entries, at most {}", models.size(), k_max_models));
    return out;
  }
  for (size_t i = 0; i < models.size(); ++i) {
    const YAML::Node m = models[i];
    const std::string where = fmt::format("models[{}]", i);
    if (!m.IsMap()) {
      c.error(m, fmt::format("{}: expected a mapping with model_id, input_lengths, ..., got {}",
                             where, Checker::kind_of(m)));
      continue;
    }
    ModelEntry e = defaults;
    e.index = i;
    e.pos = pos_of(m);
    e.model_id.clear();
    e.model_id_pos = {};
    std::set<std::string> given = given_at_top;
    for_each_key(c, m, where + ": ", k_model_keys,
                 [&](const std::string& key, const YAML::Node&, const YAML::Node& v) {
                   given.insert(key);
                   apply_model_key(c, key, v, where + "." + key, e);
                 });
    check_entry(c, e, given, where + ": ");
    out.config.models.push_back(std::move(e));
  }
  return out;
}

Expected<ConfigParse> load_sweep_config(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", path.string(), ec.message()));
  if (size > k_max_config_bytes) {
    return fail(ErrorKind::input, fmt::format("{}: {} bytes, a sweep file holds at most {}",
                                              path.string(), size, k_max_config_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorKind::io, fmt::format("{}: cannot be read", path.string()));
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in) return fail(ErrorKind::io, fmt::format("{}: cannot be read", path.string()));
  return parse_sweep_config(text);
}

std::string format_issue(const std::string& file, const ConfigIssue& issue,
                         std::string_view level) {
  if (issue.pos.line == 0) return fmt::format("{}: {}: {}", file, level, issue.message);
  return fmt::format("{}:{}:{}: {}: {}", file, issue.pos.line, issue.pos.column, level,
                     issue.message);
}

}  // namespace kvprof::experiment
