// Turns what the user passed as --model into a ModelSpec: a catalog id or alias, a config.json
// path, a model folder (config.json + safetensors headers), or a .gguf file.
#pragma once

#include <string_view>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// Resolves `ref`: an existing path is read as a file or folder, anything else is looked up in
// the catalog. Returns not_found (with hints) or input errors for unreadable/malformed files.
Expected<ModelSpec> load_model(std::string_view ref);

}  // namespace kvprof::model
