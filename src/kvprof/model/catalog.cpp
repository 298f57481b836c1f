// Loading, lookup and search of the embedded model catalog.
#include "kvprof/model/catalog.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kvprof/model/hf_config.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::embedded {
std::string_view models_json();
}

namespace kvprof::model {
namespace {

std::vector<CatalogEntry> load_catalog() {
  const auto doc = nlohmann::json::parse(embedded::models_json(), nullptr, false);
  if (doc.is_discarded() || !doc.contains("models")) {
    throw Fatal({ErrorKind::internal, "embedded data/models.json is malformed"});
  }
  std::vector<CatalogEntry> out;
  for (const auto& m : doc.at("models")) {
    CatalogEntry e;
    e.id = m.at("id").get<std::string>();
    e.aliases = m.value("aliases", std::vector<std::string>{});
    e.family = m.value("family", "");
    e.source = m.value("source", "");
    e.params_b = m.value("params_b", 0.0);
    e.extra_params = m.value("extra_params", uint64_t{0});
    e.tags = m.value("tags", std::vector<std::string>{});
    e.config = m.at("config");
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

const std::vector<CatalogEntry>& model_catalog() {
  static const std::vector<CatalogEntry> catalog = load_catalog();
  return catalog;
}

const CatalogEntry* find_catalog_entry(std::string_view name) {
  const std::string key = trim(name);
  for (const auto& e : model_catalog()) {
    if (iequals(e.id, key)) return &e;
    for (const auto& a : e.aliases) {
      if (iequals(a, key)) return &e;
    }
  }
  // "Llama-3.1-8B-Instruct" without the organisation also names the entry.
  for (const auto& e : model_catalog()) {
    const auto slash = e.id.find('/');
    if (slash != std::string::npos && iequals(std::string_view(e.id).substr(slash + 1), key)) {
      return &e;
    }
  }
  return nullptr;
}

std::vector<const CatalogEntry*> search_catalog(std::string_view text) {
  const std::string needle = to_lower(trim(text));
  std::vector<const CatalogEntry*> out;
  for (const auto& e : model_catalog()) {
    bool hit = needle.empty() || to_lower(e.id).find(needle) != std::string::npos ||
               to_lower(e.family).find(needle) != std::string::npos;
    for (const auto& a : e.aliases)
      hit = hit || to_lower(a).find(needle) != std::string::npos;
    for (const auto& t : e.tags)
      hit = hit || to_lower(t) == needle;
    if (hit) out.push_back(&e);
  }
  return out;
}

namespace {

// A quantized checkpoint's name suffix and the what-if method that prices it (longest first).
struct QuantSuffix {
  std::string_view suffix;
  std::string_view method;
};
constexpr std::array<QuantSuffix, 13> k_quant_suffixes{{
    {"-quantized.w4a16", "w4a16"},
    {"-quantized.w8a8", "w8a8"},
    {"-fp8-dynamic", "fp8-dynamic"},
    {"-gptq-int4", "gptq"},
    {"-awq-int4", "awq"},
    {"-bnb-4bit", "bnb-4bit"},
    {"-w4a16", "w4a16"},
    {"-w8a8", "w8a8"},
    {"-nvfp4", "nvfp4"},
    {"-gptq", "gptq"},
    {"-awq", "awq"},
    {"-fp8", "fp8-block"},
    {"-fp4", "nvfp4"},
}};

// `name` without a trailing release date such as "-0528" or "-2507".
std::string without_date(std::string name) {
  if (name.size() > 5 && name[name.size() - 5] == '-' &&
      std::all_of(name.end() - 4, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    name.resize(name.size() - 5);
  }
  return name;
}

const CatalogEntry* find_suffix_variant(const std::string& name_in) {
  static constexpr std::array<std::string_view, 6> k_suffixes{"-Instruct", "-Chat",    "-it",
                                                              "-Base",     "-chat-hf", "-hf"};
  std::vector<std::string> names{name_in, without_date(name_in)};
  // Renamed ids: Meta-Llama-3.1-8B-Instruct is now Llama-3.1-8B-Instruct.
  const std::string lower = to_lower(name_in);
  if (const auto at = lower.find("/meta-llama-3.1-"); at != std::string::npos) {
    names.push_back(name_in.substr(0, at + 1) + name_in.substr(at + 6));
  }
  std::vector<std::string> candidates;
  for (const auto& n : names) {
    candidates.push_back(n);
    const std::string n_lower = to_lower(n);
    for (const auto suffix : k_suffixes) {
      const std::string suffix_lower = to_lower(suffix);
      if (n_lower.ends_with(suffix_lower)) {
        const std::string stem = n.substr(0, n.size() - suffix.size());
        candidates.push_back(stem);
        for (const auto other : k_suffixes)
          candidates.push_back(stem + std::string(other));
      } else {
        candidates.push_back(n + std::string(suffix));
      }
    }
  }
  for (const auto& c : candidates) {
    if (to_lower(c) == lower) continue;
    if (const CatalogEntry* e = find_catalog_entry(c)) return e;
  }
  return nullptr;
}

// Whether `text[at, at + n)` stands alone: at the start or end, or next to a separator.
bool stands_alone(std::string_view text, size_t at, size_t n) {
  const auto separator = [](char c) { return c == '-' || c == '_' || c == '/' || c == '.'; };
  return (at == 0 || separator(text[at - 1])) && (at + n == text.size() || separator(text[at + n]));
}

// DeepSeek-R1's distilled models and the base each was trained from, as the R1 model card's
// "DeepSeek-R1-Distill Models" table lists them (huggingface.co/deepseek-ai/DeepSeek-R1): the
// name says "Qwen-14B" for a Qwen2.5-14B. The 1.5B (Qwen2.5-Math-1.5B, untied embeddings) has no
// catalog entry of its shape.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> k_distill_bases{{
    {"r1-distill-qwen-7b", "qwen2.5-7b-base"},
    {"r1-distill-qwen-14b", "qwen2.5-14b"},
    {"r1-distill-qwen-32b", "qwen2.5-32b"},
    {"r1-distill-llama-8b", "llama-3.1-8b-base"},
}};

// A distill or fine-tune whose name says which model it is built on: the R1 distills by their
// base, else the longest catalog id (without its organisation) or alias that stands alone in the
// name and names a size ("my-finetune-of-Mistral-7B-v0.3" -> mistral-7b-v0.3).
const CatalogEntry* find_named_base(std::string_view name) {
  std::string lower = to_lower(name);
  // Qwen2.5-Coder-7B has Qwen2.5-7B's architecture: the coder tuning is of the same model.
  for (size_t at = lower.find("-coder-"); at != std::string::npos; at = lower.find("-coder-"))
    lower.erase(at, 6);
  for (const auto& [distill, base] : k_distill_bases) {
    if (lower.find(distill) != std::string::npos) return find_catalog_entry(base);
  }
  const CatalogEntry* best = nullptr;
  size_t best_size = 0;
  const auto consider = [&](std::string_view candidate, const CatalogEntry& e) {
    if (candidate.size() < 8 || candidate.size() <= best_size ||
        std::none_of(candidate.begin(), candidate.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      return;
    for (size_t at = lower.find(candidate); at != std::string::npos;
         at = lower.find(candidate, at + 1)) {
      if (!stands_alone(lower, at, candidate.size())) continue;
      best = &e;
      best_size = candidate.size();
      return;
    }
  };
  for (const auto& e : model_catalog()) {
    if (std::ranges::find(e.tags, "quantized") != e.tags.end()) continue;
    const std::string id = to_lower(e.id);
    consider(std::string_view(id).substr(id.find('/') + 1), e);
    for (const auto& alias : e.aliases)
      consider(to_lower(alias), e);
  }
  return best;
}

// Another release of the same model, named by its date ("Mistral-Large-Instruct-2411" for the
// catalog's -2407; "Devstral-Small-2505" for -2507): the catalog's entry of the same name and
// organisation with another date, the latest one when there are several.
const CatalogEntry* find_dated_sibling(const std::string& name) {
  const std::string stem = to_lower(without_date(name));
  if (stem.size() == name.size()) return nullptr;
  const CatalogEntry* best = nullptr;
  for (const auto& e : model_catalog()) {
    const std::string id = to_lower(e.id);
    if (id.size() == stem.size() || to_lower(without_date(e.id)) != stem) continue;
    if (best == nullptr || id > to_lower(best->id)) best = &e;
  }
  return best;
}

}  // namespace

CatalogVariant find_catalog_variant(std::string_view name_in) {
  const std::string name(name_in);
  if (const CatalogEntry* e = find_suffix_variant(name)) return {e, ""};
  if (const CatalogEntry* e = find_dated_sibling(name)) return {e, ""};
  // A quantized checkpoint of a catalog model: the model, priced as such checkpoints are.
  std::string stem = name;
  std::string method;
  const std::string lower = to_lower(name);
  for (const auto& q : k_quant_suffixes) {
    if (!lower.ends_with(q.suffix)) continue;
    stem = name.substr(0, name.size() - q.suffix.size());
    method = q.method;
    const CatalogEntry* e = find_catalog_entry(stem);
    if (e == nullptr) e = find_suffix_variant(stem);
    if (e != nullptr) return {e, method};
    break;
  }
  const CatalogEntry* base = find_named_base(stem);
  return {base, base != nullptr ? method : std::string()};
}

namespace {

// The vision-language families composed from a text model and another size's vision tower.
struct VisionFamily {
  std::string_view prefix;  // the size follows it: "qwen2.5-vl-" then "72b"
  std::string_view vision;  // the catalog entry whose vision tower every size shares
  std::string_view text;    // the text model of a size, "{}" for it ("72B")
};
constexpr std::array<VisionFamily, 1> k_vision_families{{
    {"qwen2.5-vl-", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-{}-Instruct"},
}};

// The text model's fields a composite takes over the vision template's.
constexpr std::array<std::string_view, 8> k_text_fields{
    "hidden_size",         "intermediate_size", "num_hidden_layers",   "num_attention_heads",
    "num_key_value_heads", "vocab_size",        "tie_word_embeddings", "max_window_layers"};

}  // namespace

std::optional<CatalogComposite> find_catalog_composite(std::string_view name) {
  const std::string lower = to_lower(name);
  for (const auto& f : k_vision_families) {
    const size_t at = lower.find(f.prefix);
    if (at == std::string::npos) continue;
    // The size: digits (and a decimal point) then "b".
    size_t end = at + f.prefix.size();
    while (end < lower.size() &&
           (std::isdigit(static_cast<unsigned char>(lower[end])) != 0 || lower[end] == '.'))
      ++end;
    if (end == at + f.prefix.size() || end >= lower.size() || lower[end] != 'b') continue;
    const std::string size =
        std::string(name.substr(at + f.prefix.size(), end - at - f.prefix.size())) + "B";
    const CatalogEntry* vision = find_catalog_entry(f.vision);
    const CatalogEntry* text = find_catalog_entry(fmt::format(fmt::runtime(f.text), size));
    if (vision == nullptr || text == nullptr) continue;
    CatalogComposite out;
    out.config = vision->config;
    for (const auto field : k_text_fields) {
      const std::string key(field);
      if (text->config.contains(key)) out.config[key] = text->config.at(key);
    }
    if (out.config.contains("vision_config") && text->config.contains("hidden_size"))
      out.config["vision_config"]["out_hidden_size"] = text->config.at("hidden_size");
    out.description = fmt::format(
        "{}'s text model with {}'s vision tower (composed: every size "
        "of the family has that encoder, projected to the text width)",
        text->id, vision->id);
    return out;
  }
  return std::nullopt;
}

std::vector<std::string> catalog_suggestions(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& e : model_catalog()) {
    names.push_back(e.id);
    for (const auto& a : e.aliases)
      names.push_back(a);
  }
  return closest_matches(name, names);
}

Expected<ModelSpec> catalog_model(std::string_view name) {
  const CatalogEntry* entry = find_catalog_entry(name);
  if (entry == nullptr) {
    const auto hints = catalog_suggestions(name);
    std::string msg = fmt::format("unknown model '{}'", name);
    if (!hints.empty()) msg += fmt::format("; did you mean {}?", fmt::join(hints, ", "));
    msg += " (see `kvprof models`, or give a config.json, model folder or .gguf path)";
    return fail(ErrorKind::not_found, msg);
  }
  auto spec = parse_hf_config(entry->config, entry->source);
  if (!spec) return std::unexpected(spec.error().with_context(entry->id));
  spec->id = entry->id;
  spec->origin = ModelSpec::Origin::catalog;
  if (entry->extra_params > 0) spec->extra_params = entry->extra_params;
  if (entry->params_b > 0) spec->published_params = static_cast<uint64_t>(entry->params_b * 1e9);
  return spec;
}

}  // namespace kvprof::model
