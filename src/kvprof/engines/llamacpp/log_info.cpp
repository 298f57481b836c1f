// llama.cpp settings, model facts, build and memory breakdown table (see llamacpp_info.hpp).
// Format strings, from llama.cpp's source:
//   src/llama-context.cpp  "%s: n_ctx = %u", "%s: n_ctx_seq = %u" (older "n_ctx_per_seq"),
//                          "%s: flash_attn = %s" (auto/enabled/disabled; older "%d"),
//                          "%s: kv_unified = %s", n_seq_max, n_batch, n_ubatch
//   llama_memory_breakdown_print (newer: common_memory_breakdown_print), at exit:
//     "| memory breakdown [MiB] | total free self model context compute unaccounted |"
//     "|   - CUDA0 (RTX 5090)   | 32606 = 1057 + (29365 = 28609 + 397 + 358) + 2183 |"
//     "|   - Host               |                 30956 = 30940 +   0 +  16        |"
//   src/llama-model-loader.cpp "- kv %3d: %42s %-16s = %s"; print_info "%s: n_layer = %u"
#include <string>

#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/llamacpp/log_info.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

// Unaccounted memory is total - (free + self) in size_t, printed in MiB: a negative value
// wraps to about 2^44 MiB. Values above half of that are read as negative.
constexpr uint64_t k_wrap_mib = 1ULL << 44;

bool mib_to_bytes(uint64_t mib, uint64_t& bytes) {
  return !__builtin_mul_overflow(mib, 1ULL << 20, &bytes);
}

bool parse_breakdown_row(const LineInput& in, std::string_view row, BreakdownRow& out) {
  Cursor c(row);
  out.device = std::string(c.read_token("|:("));
  if (out.device.empty()) return false;
  if (c.eat("(")) {
    const auto rest = c.rest();
    const size_t close = rest.find(')');
    if (close == std::string_view::npos) return false;
    out.description = std::string(trim_view(rest.substr(0, close)));
    c.seek_past(")");
  }
  if (!c.eat("|") && !c.eat(":")) return false;
  // The figures, in order, and whether the "(self = ...)" group is there.
  uint64_t v[8] = {};
  size_t n = 0;
  bool group = false;
  while (!c.done()) {
    c.skip_ws();
    if (c.done()) break;
    if (auto x = c.read_uint()) {
      if (n == 8) return false;
      v[n++] = *x;
      continue;
    }
    const char ch = c.rest().front();
    if (ch == '(') group = true;
    if (ch != '=' && ch != '+' && ch != '(' && ch != ')' && ch != '|') return false;
    c.eat(std::string_view(&ch, 1));
  }
  uint64_t b[8] = {};
  for (size_t i = 0; i < n; ++i) {
    if (i != 6 && !mib_to_bytes(v[i], b[i])) return false;
  }
  size_t self_at = 0;
  if (group && n == 7) {
    out.total_bytes = b[0];
    out.free_bytes = b[1];
    self_at = 2;
    const int64_t mib = v[6] >= k_wrap_mib / 2 ? static_cast<int64_t>(v[6] % k_wrap_mib) -
                                                     static_cast<int64_t>(k_wrap_mib)
                                               : static_cast<int64_t>(v[6]);
    if (mib > INT64_MAX / (1LL << 20) || mib < INT64_MIN / (1LL << 20)) return false;
    out.unaccounted_bytes = mib * (1LL << 20);
  } else if (!group &&
             n == 5) {  // first breakdown print: "- CPU (EPYC):  515628   72 = 0 + 57 + 15"
    out.total_bytes = b[0];
    self_at = 1;
  } else if (group || n != 4) {
    return false;
  }
  out.self_bytes = b[self_at];
  out.model_bytes = b[self_at + 1];
  out.context_bytes = b[self_at + 2];
  out.compute_bytes = b[self_at + 3];
  out.source = ref(in);
  return true;
}

// "<func>: <name> = <value>" for the functions whose settings are read; the function name may
// follow a prefix (timestamp, journald "host prog[pid]: "). Returns function, name and value.
bool name_value(std::string_view text, std::string_view& func, std::string_view& name,
                std::string_view& value) {
  static constexpr std::string_view k_funcs[] = {"llama_context", "llama_new_context_with_model",
                                                 "llama_init_from_model", "print_info",
                                                 "llm_load_print_meta"};
  for (const auto f : k_funcs) {
    size_t at = text.find(f);
    while (at != std::string_view::npos) {
      const size_t end = at + f.size();
      if ((at == 0 || text[at - 1] == ' ') && text.substr(end, 2) == ": ") break;
      at = text.find(f, end);
    }
    if (at == std::string_view::npos) continue;
    func = f;
    const auto rest = text.substr(at + f.size() + 2);
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return false;
    name = trim_view(rest.substr(0, eq));
    value = trim_view(rest.substr(eq + 1));
    return !name.empty();
  }
  return false;
}

std::optional<uint64_t> whole_uint(std::string_view value) {
  Cursor c(value);
  auto v = c.read_uint();
  c.skip_ws();
  if (!v || !c.done()) return std::nullopt;
  return v;
}

bool parse_context_setting(const LineInput& in, std::string_view name, std::string_view value,
                           EngineLogReport& report) {
  auto& s = report.settings;
  if (name == "flash_attn") return keep_first(s.flash_attn, std::string(value), in);
  if (name == "kv_unified") return keep_first(s.kv_unified, std::string(value), in);
  std::optional<Printed<uint64_t>>* slot = nullptr;
  if (name == "n_ctx") slot = &s.n_ctx;
  if (name == "n_ctx_seq" || name == "n_ctx_per_seq") slot = &s.n_ctx_seq;
  if (name == "n_seq_max") slot = &s.n_seq_max;
  if (name == "n_batch") slot = &s.n_batch;
  if (name == "n_ubatch") slot = &s.n_ubatch;
  if (slot == nullptr) return false;
  const auto v = whole_uint(value);
  return v && keep_first(*slot, *v, in);
}

bool parse_print_info(const LineInput& in, std::string_view name, std::string_view value,
                      EngineLogReport& report) {
  auto& m = report.model;
  if (name == "arch") return keep_first(m.architecture, std::string(value), in);
  if (name == "general.name") return keep_first(m.name, std::string(value), in);
  if (name == "file type") return keep_first(m.file_type_name, std::string(value), in);
  if (name == "model params") return keep_first(m.n_params, std::string(value), in);
  if (name == "file size") {
    Cursor c(value);
    auto size = c.read_size();
    return size && keep_first(m.file_size, std::move(*size), in);
  }
  std::optional<Printed<uint64_t>>* slot = nullptr;
  if (name == "n_layer") slot = &m.block_count;
  if (name == "n_embd") slot = &m.embedding_length;
  if (name == "n_head") slot = &m.head_count;
  if (name == "n_head_kv") slot = &m.head_count_kv;
  if (name == "n_ctx_train") slot = &m.context_length;
  if (name == "n_vocab") slot = &m.n_vocab;
  if (slot == nullptr) return false;
  const auto v = whole_uint(value);  // per-layer arrays ("[32, 32, ...]") are not read
  return v && keep_first(*slot, *v, in);
}

// "llama_model_loader: - kv   4:                          llama.block_count u32    = 8"
bool parse_metadata(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("llama_model_loader: - kv") || !c.read_uint() || !c.eat(":")) return false;
  const auto key = c.read_token();
  const auto type = c.read_token();
  if (key.empty() || type.empty() || !c.eat("=")) return false;
  const auto value = trim_view(c.rest());
  auto& m = report.model;
  if (key == "general.architecture") return keep_first(m.architecture, std::string(value), in);
  if (key == "general.name") return keep_first(m.name, std::string(value), in);
  const size_t dot = key.find('.');
  if (dot == std::string_view::npos) return false;
  // Per-architecture keys count only for the model's own architecture.
  if (m.architecture && key.substr(0, dot) != m.architecture->value && key != "general.file_type")
    return false;
  const auto field = key.substr(dot + 1);
  std::optional<Printed<uint64_t>>* slot = nullptr;
  if (key == "general.file_type") slot = &m.file_type;
  if (field == "block_count") slot = &m.block_count;
  if (field == "embedding_length") slot = &m.embedding_length;
  if (field == "attention.head_count") slot = &m.head_count;
  if (field == "attention.head_count_kv") slot = &m.head_count_kv;
  if (field == "context_length") slot = &m.context_length;
  if (slot == nullptr) return false;
  const auto v = whole_uint(value);
  return v && keep_first(*slot, *v, in);
}

// "build: 6527 (a1b2c3d) with cc ..." or "version: 7166 (eec1e33a9)"
bool parse_build(const LineInput& in, EngineLogReport& report) {
  for (std::string_view key : {"build: ", "version: "}) {
    const size_t pos = in.text.find(key);
    if (pos == std::string_view::npos || (pos > 0 && in.text[pos - 1] != ' ')) continue;
    Cursor c(in.text.substr(pos + key.size()));
    const auto number = c.read_uint();
    if (!number || !c.eat("(")) continue;
    const auto hash = c.read_token(")");
    if (!c.eat(")")) continue;
    return keep_first(report.version, std::to_string(*number) + " (" + std::string(hash) + ")", in);
  }
  return false;
}

}  // namespace

bool parse_breakdown_line(const LineInput& in, LlamaCppState& state, EngineLogReport& report) {
  const std::string_view text = in.text;
  if (contains(text, "memory breakdown [MiB]") || contains(text, "memory breakdown:")) {
    report.breakdown.clear();
    state.in_breakdown = true;
    return true;
  }
  if (!state.in_breakdown) return false;
  const size_t dash = text.find("- ");
  BreakdownRow row;
  if (dash == std::string_view::npos || !parse_breakdown_row(in, text.substr(dash + 2), row)) {
    state.in_breakdown = false;
    return false;
  }
  report.breakdown.push_back(std::move(row));
  return true;
}

bool parse_llamacpp_info_line(const LineInput& in, EngineLogReport& report) {
  const std::string_view text = in.text;
  if (contains(text, "llama_model_loader: - kv")) return parse_metadata(in, report);
  if (contains(text, "n_slots = ")) {
    Cursor c(text);
    c.seek_past("n_slots = ");
    const auto n = c.read_uint();
    return n && keep_first(report.settings.n_slots, *n, in);
  }
  std::string_view func, name, value;
  if (name_value(text, func, name, value)) {
    if (func == "llama_context" || func == "llama_new_context_with_model" ||
        func == "llama_init_from_model") {
      return parse_context_setting(in, name, value, report);
    }
    if (func == "print_info" || func == "llm_load_print_meta") {
      return parse_print_info(in, name, value, report);
    }
  }
  return parse_build(in, report);
}

}  // namespace kvprof::engines
