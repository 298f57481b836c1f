// Loading, lookup and search of the embedded model catalog.
#include "kvprof/model/catalog.hpp"

#include <algorithm>
#include <array>

#include <array>

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

}  // namespace

CatalogVariant find_catalog_variant(std::string_view name_in) {
  const std::string name(name_in);
  if (const CatalogEntry* e = find_suffix_variant(name)) return {e, ""};
  // A quantized checkpoint of a catalog model: the model, priced as such checkpoints are.
  const std::string lower = to_lower(name);
  for (const auto& q : k_quant_suffixes) {
    if (!lower.ends_with(q.suffix)) continue;
    const std::string stem = name.substr(0, name.size() - q.suffix.size());
    const CatalogEntry* e = find_catalog_entry(stem);
    if (e == nullptr) e = find_suffix_variant(stem);
    if (e != nullptr) return {e, std::string(q.method)};
    break;
  }
  return {};
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
