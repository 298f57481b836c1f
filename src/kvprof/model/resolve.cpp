// --model resolution: a .gguf file, a config.json, a model folder (config.json + safetensors
// headers, or one .gguf), else a catalog id or alias. Folder reads cross-check the config's
// dtype and quantization against the tensors the checkpoint actually holds.
#include "kvprof/model/resolve.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "kvprof/model/catalog.hpp"
#include "kvprof/model/gguf.hpp"
#include "kvprof/model/hf_config.hpp"
#include "kvprof/model/safetensors.hpp"
#include "kvprof/model/what_if_quant.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;

Expected<ModelSpec> load_gguf(const fs::path& file) {
  auto gguf = read_gguf(file);
  if (!gguf) return std::unexpected(gguf.error());
  auto spec = model_from_gguf(*gguf, file.string());
  if (!spec) return std::unexpected(spec.error().with_context(file.string()));
  return spec;
}

Expected<ModelSpec> load_config_file(const fs::path& file) {
  const std::string where = file.string();
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", where, ec.message()));
  if (size > k_max_config_json_bytes) {
    return fail(ErrorKind::input, fmt::format("{}: {} bytes, more than the 16 MiB a config.json "
                                              "may have",
                                              where, size));
  }
  std::ifstream in(file, std::ios::binary);
  std::string text(size, '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(size))) {
    return fail(ErrorKind::io, fmt::format("{}: cannot read", where));
  }
  return parse_hf_config_text(text, where);
}

// Bytes per tensor type over the checkpoint.
std::map<std::string, uint64_t> bytes_by_type(const std::vector<TensorInfo>& tensors) {
  std::map<std::string, uint64_t> out;
  for (const auto& t : tensors)
    out[t.type_name] += t.bytes;
  return out;
}

bool ends_with_any(const std::vector<TensorInfo>& tensors, std::string_view suffix) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const TensorInfo& t) { return t.name.ends_with(suffix); });
}

// Warnings where config.json and the safetensors headers disagree.
void cross_check(ModelSpec& m) {
  const auto by_type = bytes_by_type(m.tensors);
  std::string top_float;
  uint64_t top_bytes = 0;
  uint64_t fp8_bytes = 0;
  for (const auto& [type, bytes] : by_type) {
    if ((type == "BF16" || type == "F16" || type == "F32") && bytes > top_bytes) {
      top_float = type;
      top_bytes = bytes;
    }
    if (type.starts_with("F8_E4") || type.starts_with("F8_E5")) fp8_bytes += bytes;
  }
  const auto declared = parse_dtype(top_float);
  if (declared && *declared != m.dtype) {
    m.warnings.push_back(
        fmt::format("config.json says torch_dtype {} but most unquantized weight "
                    "bytes are {}",
                    dtype_name(m.dtype), top_float));
  }
  switch (m.quant.method) {
    case QuantMethod::none:
      if (fp8_bytes > 0) {
        m.warnings.push_back(
            "checkpoint holds fp8 tensors but config.json has no quantization_config");
      }
      if (ends_with_any(m.tensors, ".qweight")) {
        m.warnings.push_back(
            "checkpoint holds packed qweight tensors but config.json has no "
            "quantization_config");
      }
      break;
    case QuantMethod::awq:
    case QuantMethod::gptq:
      if (!ends_with_any(m.tensors, ".qweight")) {
        m.warnings.push_back(
            "quantization_config says awq/gptq but the checkpoint has no qweight tensors");
      }
      break;
    case QuantMethod::fp8:
      if (fp8_bytes == 0) {
        m.warnings.push_back("quantization_config says fp8 but the checkpoint has no fp8 tensors");
      }
      break;
    case QuantMethod::mxfp4:
      if (!ends_with_any(m.tensors, "_blocks")) {
        m.warnings.push_back(
            "quantization_config says mxfp4 but the checkpoint has no *_blocks tensors");
      }
      break;
    default:
      break;
  }
  // Decoder layers in the tensor names ("model.layers.N.") against num_hidden_layers (+ MTP).
  uint64_t max_layer = 0;
  bool any_layer = false;
  for (const auto& t : m.tensors) {
    const auto pos = t.name.find("layers.");
    if (pos == std::string::npos) continue;
    uint64_t idx = 0;
    size_t i = pos + 7;
    size_t digits = 0;
    while (i < t.name.size() && digits < 9 && t.name[i] >= '0' && t.name[i] <= '9') {
      idx = idx * 10 + static_cast<uint64_t>(t.name[i] - '0');
      ++i;
      ++digits;
    }
    if (digits == 0 || t.name.find("vision") != std::string::npos) continue;
    any_layer = true;
    max_layer = std::max(max_layer, idx);
  }
  if (any_layer && max_layer + 1 != m.n_layer && max_layer + 1 != m.n_layer + m.n_mtp_layers) {
    m.warnings.push_back(
        fmt::format("checkpoint tensors name {} decoder layers but config.json "
                    "says {}",
                    max_layer + 1, m.n_layer));
  }
}

bool has_safetensors(const fs::path& folder) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.path().extension() == ".safetensors") return true;
  }
  return fs::exists(folder / "model.safetensors.index.json", ec);
}

Expected<ModelSpec> load_folder(const fs::path& folder) {
  std::error_code ec;
  const fs::path config = folder / "config.json";
  if (fs::is_regular_file(config, ec)) {
    auto spec = load_config_file(config);
    if (!spec) return spec;
    spec->id = folder.string();
    spec->source = folder.string();
    if (has_safetensors(folder)) {
      auto tensors = read_safetensors_folder(folder);
      if (!tensors) return std::unexpected(tensors.error());
      spec->tensors = std::move(*tensors);
      spec->origin = ModelSpec::Origin::safetensors;
      cross_check(*spec);
    }
    return spec;
  }
  std::vector<fs::path> ggufs;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.path().extension() == ".gguf") ggufs.push_back(e.path());
  }
  if (ggufs.size() == 1) return load_gguf(ggufs.front());
  if (ggufs.size() > 1) {
    return fail(ErrorKind::input, fmt::format("{}: {} .gguf files; name the one to use",
                                              folder.string(), ggufs.size()));
  }
  return fail(ErrorKind::not_found,
              fmt::format("{}: no config.json or .gguf file in this folder", folder.string()));
}

// True when `ref` cannot be a catalog id: it names a file type or starts like a path.
bool looks_like_path(std::string_view ref) {
  const std::string lower = to_lower(ref);
  return lower.ends_with(".json") || lower.ends_with(".gguf") || lower.ends_with(".safetensors") ||
         ref.starts_with('/') || ref.starts_with("./") || ref.starts_with("../") ||
         ref.starts_with('~') || ref == "." || ref == "..";
}

Expected<ModelSpec> spec_from_hub(const HubFiles& files) {
  auto spec = parse_hf_config_text(files.config_text, files.repo_id + "/config.json");
  if (!spec) return spec;
  spec->id = files.repo_id;
  spec->source = files.source;
  if (!files.tensors.empty()) {
    spec->tensors = files.tensors;
    spec->origin = ModelSpec::Origin::safetensors;
    cross_check(*spec);
  }
  for (const auto& note : files.notes)
    spec->warnings.push_back(files.repo_id + ": " + note);
  return spec;
}

// A Hub id the catalog lacks: the cache or the Hub; when neither has it, the Hub's reason with
// the catalog's "did you mean".
Expected<ModelSpec> hub_model(const std::string& ref, const LoadOptions& options) {
  auto files = fetch_hub_files(ref, options.hub);
  if (files) return spec_from_hub(*files);
  if (files.error().kind != ErrorKind::not_found && files.error().kind != ErrorKind::network) {
    return std::unexpected(files.error());
  }
  // Neither the cache nor the Hub could answer (404 is a typo more often than a variant): a
  // catalog entry of the same architecture, with a note saying so.
  if (const CatalogVariant variant = find_catalog_variant(ref);
      variant.entry != nullptr &&
      (files.error().kind == ErrorKind::network || options.hub.offline)) {
    auto spec = catalog_model(variant.entry->id);
    if (spec && !variant.quantization.empty() && spec->quant.method == QuantMethod::none) {
      // Priced as the usual checkpoint of that method is, which this one is.
      auto q = what_if_quantization(variant.quantization);
      if (q && *q) {
        spec->quant = **q;
        spec->quant.from_checkpoint = true;
      }
    }
    if (spec) {
      spec->warnings.push_back(fmt::format(
          "{} is described by the built-in catalog's {}{} (a variant of the same architecture), "
          "since {}",
          ref, variant.entry->id,
          variant.quantization.empty() ? std::string()
                                       : fmt::format(" with {} quantization", variant.quantization),
          files.error().message));
      return spec;
    }
  }
  if (files.error().kind == ErrorKind::network || options.hub.offline) {
    if (auto composite = find_catalog_composite(ref)) {
      auto spec = parse_hf_config(composite->config, composite->description);
      if (spec) {
        spec->id = ref;
        spec->warnings.push_back(
            fmt::format("{} is described by the built-in catalog's {}, since {}", ref,
                        composite->description, files.error().message));
        return spec;
      }
    }
  }
  std::string message = files.error().message + "; the built-in catalog does not have it either";
  const auto hints = catalog_suggestions(ref);
  message += hints.empty() ? std::string(" (see `kvprof models`)")
                           : fmt::format(": did you mean {}?", fmt::join(hints, ", "));
  return fail(files.error().kind, message);
}

}  // namespace

Expected<ModelSpec> load_model(std::string_view ref) {
  return load_model(ref, LoadOptions{});
}

Expected<ModelSpec> load_model(std::string_view ref_in, const LoadOptions& options) {
  const std::string ref = trim(ref_in);
  if (ref.empty()) return fail(ErrorKind::usage, "no model given");
  const fs::path path(ref);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (fs::is_directory(path, ec)) return load_folder(path);
    const std::string ext = to_lower(path.extension().string());
    if (ext == ".gguf") return load_gguf(path);
    if (ext == ".json") return load_config_file(path);
    if (ext == ".safetensors") {
      return fail(ErrorKind::input,
                  fmt::format("{}: a .safetensors file holds no architecture; give "
                              "the model folder with its config.json",
                              ref));
    }
    return fail(ErrorKind::input,
                fmt::format("{}: not a .gguf file, a config.json or a model folder", ref));
  }
  if (looks_like_path(ref)) return fail(ErrorKind::not_found, fmt::format("{}: no such file", ref));
  if (find_catalog_entry(ref) == nullptr && is_hub_repo_id(ref)) return hub_model(ref, options);
  return catalog_model(ref);
}

}  // namespace kvprof::model
