// The built-in model catalog (data/models.json): each entry is the published config.json facts
// of a widely deployed model, with its HF id, aliases and the source it was taken from.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

struct CatalogEntry {
  std::string id;                    // HF id, e.g. "meta-llama/Llama-3.1-8B-Instruct"
  std::vector<std::string> aliases;  // short names, e.g. "llama-3.1-8b"
  std::string family;                // e.g. "Llama 3.1"
  std::string source;                // citation of the config.json the facts come from
  double params_b = 0;               // published parameter count, billions (display)
  uint64_t extra_params = 0;         // parameters outside the text decoder (vision tower, ...)
  std::vector<std::string> tags;     // "moe", "mla", "vlm", "sliding", "hybrid", "quantized", ...
  nlohmann::json config;             // the config.json subset, HF field names
};

// The catalog, parsed once from the embedded data/models.json; throws Fatal(internal) when the
// embedded file is malformed (a build defect the tests catch).
const std::vector<CatalogEntry>& model_catalog();

// Finds an entry by HF id or alias, ignoring case; nullptr when absent.
const CatalogEntry* find_catalog_entry(std::string_view name);

// Entries whose id, alias, family or tags contain `text` (case-insensitive); all when empty.
std::vector<const CatalogEntry*> search_catalog(std::string_view text);

// A catalog entry another id is a variant of, and the quantization its name says it adds.
struct CatalogVariant {
  const CatalogEntry* entry = nullptr;
  std::string quantization;  // a what-if method ("awq", "fp8", ...) from a suffix; "" = none
};

// A vision-language model of a size the catalog lacks, composed from the catalog: the text
// model of that size and the vision tower of the family's size the catalog has (Qwen2.5-VL's
// sizes share one vision encoder, whose merger projects to the text model's width).
struct CatalogComposite {
  nlohmann::json config;    // the composed config.json
  std::string description;  // "Qwen/Qwen2.5-72B-Instruct's text model with ..."
};

// The composite `name` names ("Qwen/Qwen2.5-VL-72B-Instruct"), or nullopt.
std::optional<CatalogComposite> find_catalog_composite(std::string_view name);

// The catalog entry `name` is a variant of: the same id with or without a chat/instruct suffix
// (-Instruct, -Chat, -it, -Base, -hf, -chat-hf), a release date (-0528, -2507), a quantized
// checkpoint's suffix (-AWQ, -GPTQ-Int4, -FP8, -FP8-dynamic, -quantized.w4a16, -bnb-4bit, ...),
// or a renamed id (Meta-Llama-3.1-* -> Llama-3.1-*); else a distill or fine-tune whose name says
// its base (DeepSeek-R1-Distill-Qwen-14B is a Qwen2.5-14B; "x/my-Mistral-7B-v0.3-tune" names
// mistral-7b-v0.3); entry nullptr when none. Variants share the architecture, so the entry's
// facts hold.
CatalogVariant find_catalog_variant(std::string_view name);

// The catalog ids and aliases closest to `name` (the "did you mean" of errors).
std::vector<std::string> catalog_suggestions(std::string_view name);

// The ModelSpec of a catalog model; not_found with "did you mean" hints when absent.
Expected<ModelSpec> catalog_model(std::string_view name);

}  // namespace kvprof::model
