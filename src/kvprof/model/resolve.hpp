// Turns what the user passed as --model into a ModelSpec: a catalog id or alias, a config.json
// path, a model folder (config.json + safetensors headers), a .gguf file, or a Hugging Face Hub
// id (its config.json and safetensors headers, from the local HF cache or the Hub).
#pragma once

#include <string_view>

#include "kvprof/model/hf_hub.hpp"
#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

struct LoadOptions {
  HubOptions hub = hub_options_from_env();
};

// Resolves `ref`: an existing path is read as a file or folder; a catalog id or alias from the
// catalog; any other ORG/NAME from the local Hugging Face cache, else the Hub (hf_hub.hpp).
// Returns not_found (with the catalog's hints) or input errors for unreadable/malformed files.
Expected<ModelSpec> load_model(std::string_view ref, const LoadOptions& options);
// As above, with the Hub settings of the environment (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE).
Expected<ModelSpec> load_model(std::string_view ref);

}  // namespace kvprof::model
